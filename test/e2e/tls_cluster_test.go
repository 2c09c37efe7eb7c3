package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/metastore-io/metastore/test/framework"
)

// mutualTLS is kubeadm's set: client and peer URLs over TLS, each side
// requiring a certificate of the cluster's CA.
func mutualTLS() *framework.TLSConfig { return &framework.TLSConfig{Client: true, Peer: true} }

// TestTLSMutualCluster runs a 3-member cluster with client and peer
// mutual TLS and drives it through clientv3, the stock etcdctl and plain
// HTTPS: writes on every member (followers forward them to the leader
// over the peer TLS connections), linearizable reads, a watch, leases,
// locks, elections, the member list, the JSON gateway, /health, /metrics.
func TestTLSMutualCluster(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, TLS: mutualTLS()})
	mc := newMemberClients(t, c)
	leader := mc.waitLeader(ctx, t, c.Members())

	watcher := c.Members()[2]
	wch := mc.of(t, watcher).Watch(ctx, "/tls/", clientv3.WithPrefix())
	for i, m := range c.Members() {
		mustPut(ctx, t, mc.of(t, m), "/tls/"+m.Name(), "from-"+m.Name())
		for _, reader := range c.Members() {
			resp := mustGet(ctx, t, mc.of(t, reader), "/tls/", clientv3.WithPrefix())
			if len(resp.Kvs) != i+1 {
				t.Fatalf("member %s sees %d keys after %d writes", reader.Name(), len(resp.Kvs), i+1)
			}
		}
	}
	var events []string
	for len(events) < 3 {
		select {
		case wr := <-wch:
			if err := wr.Err(); err != nil {
				t.Fatalf("watch: %v", err)
			}
			for _, ev := range wr.Events {
				events = append(events, string(ev.Kv.Key))
			}
		case <-ctx.Done():
			t.Fatalf("watch saw %v before the deadline", events)
		}
	}

	cli := mc.of(t, c.Members()[1])
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(ctx, t, cli, "/tls/leased", "v", clientv3.WithLease(lease.ID))
	ttl, err := mc.of(t, leader).TimeToLive(ctx, lease.ID, clientv3.WithAttachedKeys())
	if err != nil || len(ttl.Keys) != 1 {
		t.Fatalf("lease time-to-live over TLS: %v, %+v", err, ttl)
	}
	if _, err := cli.KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatalf("keep-alive over TLS: %v", err)
	}
	session, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	mu := concurrency.NewMutex(session, "/tls/lock")
	if err := mu.Lock(ctx); err != nil {
		t.Fatalf("lock over TLS: %v", err)
	}
	if err := mu.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	etcdctl := c.Etcdctl()
	out := runEtcdctlRetrying(ctx, t, etcdctl, "get", "/tls/m0", "--print-value-only")
	if strings.TrimSpace(out) != "from-m0" {
		t.Fatalf("etcdctl get over TLS printed %q", out)
	}
	runEtcdctlRetrying(ctx, t, etcdctl, "put", "/tls/etcdctl", "v")
	out = runEtcdctlRetrying(ctx, t, etcdctl, "endpoint", "health")
	if strings.Count(out, "is healthy") != 3 {
		t.Fatalf("etcdctl endpoint health over TLS:\n%s", out)
	}
	out = runEtcdctlRetrying(ctx, t, etcdctl, "lock", "/tls/etcdctl-lock", "echo", "locked")
	if !strings.Contains(out, "locked") {
		t.Fatalf("etcdctl lock over TLS printed %q", out)
	}
	for _, m := range memberList(ctx, t, etcdctl).Members {
		if len(m.PeerURLs) != 1 || !strings.HasPrefix(m.PeerURLs[0], "https://") ||
			len(m.ClientURLs) != 1 || !strings.HasPrefix(m.ClientURLs[0], "https://") {
			t.Fatalf("member %s advertises %v / %v, want https URLs", m.Name, m.PeerURLs, m.ClientURLs)
		}
	}
	checkHTTPSEndpoints(ctx, t, c)
}

// checkHTTPSEndpoints fetches the HTTP endpoints over TLS with the client
// certificate, over HTTP/2 (what Go and curl negotiate) and HTTP/1.1.
func checkHTTPSEndpoints(ctx context.Context, t *testing.T, c *framework.Cluster) {
	t.Helper()
	tlsCfg, err := c.TLS().ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	for _, h2 := range []bool{true, false} {
		tr := &http.Transport{TLSClientConfig: tlsCfg.Clone(), ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		base := c.Member(0).ClientURL()
		for _, path := range []string{"/health", "/livez", "/readyz", "/version", "/metrics"} {
			body, proto := httpsGet(ctx, t, hc, "GET", base+path, "")
			if (proto == "HTTP/2.0") != h2 {
				t.Fatalf("GET %s went over %s", path, proto)
			}
			if path == "/health" && !strings.Contains(body, `"health":"true"`) {
				t.Fatalf("GET /health over TLS: %s", body)
			}
		}
		body, _ := httpsGet(ctx, t, hc, "POST", base+"/v3/kv/range", `{"key":"L3Rscy9tMA=="}`) // /tls/m0
		var rr struct {
			Kvs []struct{ Value string } `json:"kvs"`
		}
		if err := json.Unmarshal([]byte(body), &rr); err != nil || len(rr.Kvs) != 1 || rr.Kvs[0].Value != "ZnJvbS1tMA==" {
			t.Fatalf("gateway range over TLS: %s (%v)", body, err)
		}
		tr.CloseIdleConnections()
	}
}

func httpsGet(ctx context.Context, t *testing.T, hc *http.Client, method, url, body string) (string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %s (%v)", method, url, resp.Status, b, err)
	}
	return string(b), resp.Proto
}
