package e2e

import (
	"encoding/json"
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
