package embed

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const testTimeout = time.Minute

func testConfig(t *testing.T) *Config {
	t.Helper()
	cfg := NewConfig()
	cfg.Dir = t.TempDir()
	anyPort := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{anyPort}, []url.URL{anyPort}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{anyPort}, []url.URL{anyPort}
	return cfg
}

func startReady(t *testing.T, cfg *Config) *Member {
	t.Helper()
	m, err := StartMember(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	select {
	case <-m.ReadyNotify():
	case err := <-m.Err():
		t.Fatalf("member stopped before it was ready: %v", err)
	case <-time.After(testTimeout):
		t.Fatal("member not ready")
	}
	return m
}

func TestTwoMembersInOneProcessAreIndependent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a := startReady(t, testConfig(t))
	cfgB := testConfig(t)
	cfgB.StorageEngine = "rocksdb"
	b := startReady(t, cfgB)
	if a.ClientURLs()[0] == b.ClientURLs()[0] || strings.HasSuffix(a.ClientURLs()[0], ":0") {
		t.Fatalf("client URLs %v and %v", a.ClientURLs(), b.ClientURLs())
	}
	if got := a.Config().AdvertisePeerUrls[0].Port(); got == "0" || !strings.Contains(a.Config().InitialCluster, got) {
		t.Fatalf("advertised peer URL %v and initial cluster %q do not name the bound port", a.Config().AdvertisePeerUrls, a.Config().InitialCluster)
	}
	for i, m := range []*Member{a, b} {
		cli, err := clientv3.New(clientv3.Config{Endpoints: m.ClientURLs(), DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		if _, err := cli.Put(ctx, "who", string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Get(ctx, "who")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != string(rune('a'+i)) || resp.Header.Revision != 2 {
			t.Fatalf("member %d: %v, %v", i, resp, err)
		}
	}
}

func TestCloseStopsAndClosesErr(t *testing.T) {
	m := startReady(t, testConfig(t))
	m.Close()
	select {
	case err, ok := <-m.Err():
		if ok {
			t.Fatalf("Err delivered %v after a Close", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Err not closed after Close")
	}
	<-m.StopNotify()
	m.Close() // a second Close returns at once
}

func TestCloseBeforeReady(t *testing.T) {
	cfg := testConfig(t)
	// A member of a two-member cluster whose peer never starts: it can
	// never elect a leader, so it is never ready.
	cfg.InitialCluster = "default=http://127.0.0.1:1,other=http://127.0.0.1:2"
	cfg.AdvertisePeerUrls = []url.URL{{Scheme: "http", Host: "127.0.0.1:1"}}
	m, err := StartMember(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { m.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("Close of a member that never got ready hangs")
	}
	select {
	case <-m.ReadyNotify():
		t.Fatal("a member that never had a leader reported ready")
	default:
	}
}

func TestValidateRefusesWhatEtcdRefuses(t *testing.T) {
	for name, change := range map[string]func(*Config){
		"no name":            func(c *Config) { c.Name = "" },
		"https URL":          func(c *Config) { c.ListenClientUrls = []url.URL{{Scheme: "https", Host: "127.0.0.1:0"}} },
		"no peer URL":        func(c *Config) { c.ListenPeerUrls = nil },
		"unknown engine":     func(c *Config) { c.StorageEngine = "bbolt" },
		"cluster state":      func(c *Config) { c.ClusterState = "joining" },
		"election < 5 ticks": func(c *Config) { c.ElectionMs = 200 },
	} {
		cfg := testConfig(t)
		change(cfg)
		if _, err := StartMember(cfg); err == nil {
			t.Errorf("%s: StartMember accepted the config", name)
		}
	}
}

// TestMetricsServedPerMember checks each member serves its own etcd series
// on /metrics, as an embedded etcd does.
func TestMetricsServedPerMember(t *testing.T) {
	a := startReady(t, testConfig(t))
	b := startReady(t, testConfig(t))
	for _, m := range []*Member{a, b} {
		resp, err := http.Get(m.ClientURLs()[0] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"\netcd_server_has_leader 1\n", "\netcd_mvcc_db_total_size_in_bytes ", "\ngrpc_server_started_total{"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("%s/metrics lacks %q", m.ClientURLs()[0], strings.TrimSpace(want))
			}
		}
	}
}
