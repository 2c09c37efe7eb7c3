package member

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/internal/server"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
	"github.com/metastore-io/metastore/pkg/lockapi"
)

const testTimeout = 30 * time.Second

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testConfig is a one-member cluster serving peers and clients on
// loopback listeners of its own.
func testConfig(t *testing.T) (Config, string) {
	t.Helper()
	peer, client := listen(t), listen(t)
	peerURL, clientURL := "http://"+peer.Addr().String(), "http://"+client.Addr().String()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	return Config{
		Server: server.Config{
			Name:                "m1",
			DataDir:             t.TempDir(),
			InitialCluster:      []membership.InitialMember{{Name: "m1", PeerURLs: []string{peerURL}}},
			InitialClusterToken: "test",
			NewCluster:          true,
			PeerURLs:            []string{peerURL},
			ClientURLs:          []string{clientURL},
			SnapshotCount:       50,
			MaxRequestBytes:     1536 * 1024,
			MaxTxnOps:           128,
			TickInterval:        10 * time.Millisecond,
			ElectionTicks:       10,
			Backend:             memory.New(),
			Logger:              logger,
			PeerListeners:       []net.Listener{peer},
		},
		Client:          etcdcompat.Config{MaxRequestBytes: 1536 * 1024, MaxTxnOps: 128, Logger: logger},
		ClientListeners: []ClientListener{{Listener: client}},
	}, clientURL
}

func start(t *testing.T, cfg Config) *Member {
	t.Helper()
	m, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start member: %v", err)
	}
	select {
	case <-m.Ready():
	case <-time.After(testTimeout):
		m.Stop()
		t.Fatal("member not ready")
	}
	return m
}

// A member serving clients and peers, started and stopped over and over
// in one process, leaves nothing running: every goroutine, listener and
// connection its runtime and its client services start ends by the time
// Stop returns; and what the root wires is there: the KV service answers
// over the runtime, the HTTP lock service is mounted, and the runtime
// records the cluster version the client services speak.
func TestStartStopLeavesNothingRunning(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for range 4 {
		cfg, url := testConfig(t)
		m := start(t, cfg)
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: testTimeout, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, "k", "v"); err != nil {
			t.Fatalf("put: %v", err)
		}
		if got, err := cli.Status(ctx, url); err != nil || got.Header.MemberId == 0 {
			t.Fatalf("status: %v %v", got, err)
		}
		cli.Close()
		for m.Server().ClusterVersion() == "" {
			select {
			case <-ctx.Done():
				t.Fatal("no cluster version recorded")
			case <-time.After(time.Millisecond):
			}
		}
		if got := m.Server().ClusterVersion(); got != etcdcompat.EtcdClusterVersion {
			t.Fatalf("cluster version %q, want %q", got, etcdcompat.EtcdClusterVersion)
		}
		assertLockServiceMounted(t, ctx, url)
		m.Stop()
		if err := m.Err(); err != nil {
			t.Fatalf("a plain Stop left Err %v", err)
		}
	}
}

// assertLockServiceMounted checks that /v1/lock/status answers with the
// lock service's JSON (no holder on a fresh member), not the mux's 404.
func assertLockServiceMounted(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+lockapi.PathStatus+"?Type=t&ResourceID=r", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("lock service status: %v", err)
	}
	defer resp.Body.Close()
	var st lockapi.StatusResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("lock service status: %s, decode: %v", resp.Status, err)
	}
	if st.Holder != nil {
		t.Fatalf("lock service status on a fresh member: holder %v", st.Holder)
	}
}

// A member whose start fails closes the client listeners it was given.
func TestStartFailureClosesClientListeners(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.Server.Backend = nil // server.New refuses
	client := cfg.ClientListeners[0].Listener
	if _, err := Start(context.Background(), cfg); err == nil {
		t.Fatal("a member without a backend started")
	}
	if _, err := client.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("client listener after a failed start: Accept gave %v, want net.ErrClosed", err)
	}
}
