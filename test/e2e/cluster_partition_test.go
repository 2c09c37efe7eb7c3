package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// isolatedRequestTimeout is how long the test gives an isolated member to
// (wrongly) serve a request: several election timeouts.
const isolatedRequestTimeout = 3 * time.Second

// TestClusterPartitionLeader cuts the leader off with the peer proxies:
// the majority elects a new leader and keeps serving, the isolated old
// leader serves no linearizable read and commits no write, and once healed
// it rejoins as a follower, catches up, and the write it was asked for
// while isolated never appears.
func TestClusterPartitionLeader(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, PeerProxies: true})
	mc := newMemberClients(t, c)
	all := c.Members()
	oldLeader := mc.waitLeader(ctx, t, all)
	majority := others(all, oldLeader)
	mustPut(ctx, t, mc.of(t, oldLeader), "/partition/before", "1")

	c.Network().Isolate(oldLeader.Name())
	cutAt := time.Now()
	leaderCtx, cancel := context.WithTimeout(ctx, leaderBound)
	newLeader := mc.waitLeader(leaderCtx, t, majority)
	cancel()
	t.Logf("%s isolated; %s leads the majority after %v", oldLeader.Name(), newLeader.Name(), time.Since(cutAt).Round(time.Millisecond))
	mustPut(ctx, t, mc.of(t, newLeader), "/partition/during", "2")

	isolated := mc.of(t, oldLeader)
	rctx, cancel := context.WithTimeout(ctx, isolatedRequestTimeout)
	resp, err := isolated.Get(rctx, "/partition/during")
	cancel()
	if err == nil {
		t.Fatalf("isolated %s served a linearizable read (%d keys at revision %d)", oldLeader.Name(), len(resp.Kvs), resp.Header.Revision)
	}
	if !isUnavailable(err) {
		t.Fatalf("linearizable read on isolated %s: %v, want a no-leader or timeout error", oldLeader.Name(), err)
	}
	wctx, cancel := context.WithTimeout(ctx, isolatedRequestTimeout)
	_, err = isolated.Put(wctx, "/partition/lost", "x")
	cancel()
	if err == nil {
		t.Fatalf("isolated %s acknowledged a write", oldLeader.Name())
	}
	if !isUnavailable(err) {
		t.Fatalf("write on isolated %s: %v, want a no-leader or timeout error", oldLeader.Name(), err)
	}

	c.Network().Heal(oldLeader.Name())
	healedCtx, cancel := context.WithTimeout(ctx, leaderBound)
	healed := mc.waitLeader(healedCtx, t, all)
	cancel()
	if healed == oldLeader {
		t.Fatalf("after healing, the isolated %s leads again; want it to rejoin as a follower", oldLeader.Name())
	}
	got := mustGet(ctx, t, isolated, "/partition/during")
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "2" {
		t.Fatalf("healed %s does not see the majority's write: %v", oldLeader.Name(), got.Kvs)
	}
	for _, m := range all {
		if lost := mustGet(ctx, t, mc.of(t, m), "/partition/lost"); len(lost.Kvs) != 0 {
			t.Fatalf("the write refused while isolated appeared on %s", m.Name())
		}
	}
	mc.requireSameHashKV(ctx, t, all, got.Header.Revision)
}
