package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// TestClusterVersionEntry checks that a new one-member cluster writes
// the raft entries etcd's does: the bootstrap conf change, the leader's
// empty entry, the member's attributes and the cluster version (etcd's
// ClusterVersionSet, proposed by the leader at its first commit), so
// `etcdctl endpoint status` reports raft index 4 as etcd does, and 5
// after one put. /version's etcdcluster says "not_decided" until the
// version is recorded and 3.6.0 after.
func TestClusterVersionEntry(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	url := s.member().ClientURL() + "/version"

	var v struct{ Etcdserver, Etcdcluster string }
	for {
		code, body, err := httpGet(ctx, url)
		if err != nil || code != 200 {
			t.Fatalf("GET /version: %d %q %v", code, body, err)
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("GET /version: %q: %v", body, err)
		}
		if v.Etcdcluster != "not_decided" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the cluster version was never decided")
		case <-time.After(20 * time.Millisecond): // poll; the deadline is ctx's
		}
	}
	if v.Etcdcluster != "3.6.0" || !etcdVersion.MatchString(v.Etcdserver) {
		t.Fatalf("/version = %+v, want etcdcluster 3.6.0 and etcdserver 3.6.x", v)
	}

	// The version is recorded once it is decided; the entry is applied
	// when a linearizable read returns.
	mustGet(ctx, t, s.cli, "k")
	st, err := s.cli.Status(ctx, s.member().ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if st.RaftIndex != 4 || st.RaftAppliedIndex != 4 {
		t.Errorf("a new member's raft index %d (applied %d), want 4 as etcd: conf change, leader entry, attributes, cluster version",
			st.RaftIndex, st.RaftAppliedIndex)
	}
	mustPut(ctx, t, s.cli, "k", "v")
	if st, err = s.cli.Status(ctx, s.member().ClientURL()); err != nil {
		t.Fatal(err)
	}
	if st.RaftIndex != 5 || st.Header.Revision != 2 {
		t.Errorf("after one put: raft index %d, revision %d; want 5 and 2", st.RaftIndex, st.Header.Revision)
	}
}

// TestPeerVersionEndpoints: a running member answers what etcd's members
// ask it before they join its cluster, on its peer listener and as etcd:
// /version (the same JSON as the client listener's, without a trailing
// newline; only GET) and /downgrade/enabled ("false" while no downgrade
// job is enabled). An etcd member that cannot read them refuses to join
// ("incompatible with current running cluster").
func TestPeerVersionEndpoints(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "k", "v") // the cluster version is recorded by now
	peer := s.member().PeerURL()

	code, body, err := httpGet(ctx, peer+"/version")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET peer /version: %d %q %v", code, body, err)
	}
	if !strings.HasPrefix(body, `{"etcdserver":"3.6.`) ||
		!strings.HasSuffix(body, `","etcdcluster":"3.6.0","storage":"3.6.0"}`) {
		t.Fatalf("peer /version = %q, want etcd's JSON for 3.6 without a newline", body)
	}
	if _, client, err := httpGet(ctx, s.member().ClientURL()+"/version"); err != nil || client != body {
		t.Fatalf("client /version %q (%v), peer %q: want the same", client, err, body)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, peer+"/version", nil)
	if code, body, err := doHTTP(req); err != nil || code != http.StatusMethodNotAllowed || body != "Method Not Allowed\n" {
		t.Fatalf("POST peer /version: %d %q %v", code, body, err)
	}
	if code, body, err := httpGet(ctx, peer+"/downgrade/enabled"); err != nil || code != http.StatusOK || body != "false" {
		t.Fatalf("GET peer /downgrade/enabled: %d %q %v", code, body, err)
	}
}
