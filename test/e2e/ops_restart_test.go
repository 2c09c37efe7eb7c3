package e2e

import (
	"strings"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// TestRestartIgnoresInitialClusterFlags restarts a member of a 3-member
// cluster with another --initial-cluster-token, an --initial-cluster that
// no longer matches and --initial-cluster-state=existing: once a data dir
// holds a log, etcd takes the member and cluster IDs from it and ignores
// those flags, so the member rejoins its cluster and serves as before.
func TestRestartIgnoresInitialClusterFlags(t *testing.T) {
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	ctx := testContext(t, clusterTestTimeout)
	mc := newMemberClients(t, c)
	m1 := c.Member(1)
	idBefore := mc.memberID(ctx, t, m1)
	mustPut(ctx, t, mc.of(t, c.Member(0)), "/restart/before", "v")
	if _, err := m1.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range m1.Args() {
		switch {
		case strings.HasPrefix(a, "--initial-cluster-token="):
			a = "--initial-cluster-token=another-token"
		case strings.HasPrefix(a, "--initial-cluster-state="):
			a = "--initial-cluster-state=existing"
		case strings.HasPrefix(a, "--initial-cluster="):
			a = "--initial-cluster=" + m1.Name() + "=" + m1.PeerURL()
		}
		args = append(args, a)
	}
	m1.SetArgs(args)
	if err := m1.Restart(ctx); err != nil {
		t.Fatalf("restart with changed --initial-cluster flags: %v", err)
	}
	mc = newMemberClients(t, c)
	if id := mc.memberID(ctx, t, m1); id != idBefore {
		t.Fatalf("member ID after restart %x, want %x from its data dir", id, idBefore)
	}
	cli := mc.of(t, m1)
	if got := mustGet(ctx, t, cli, "/restart/before"); len(got.Kvs) != 1 {
		t.Fatalf("key written before the restart: %v", got.Kvs)
	}
	mustPut(ctx, t, cli, "/restart/after", "v")
	mc.requireSameHashKV(ctx, t, c.Members(), 0)
}
