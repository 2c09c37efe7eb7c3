package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// TestClusterBootstrap starts 3- and 5-member clusters: etcdctl sees one
// leader on every member, a write made through any member is visible to a
// linearizable read on every other, and the key history hashes alike.
func TestClusterBootstrap(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d-members", size), func(t *testing.T) {
			ctx := testContext(t, clusterTestTimeout)
			c := framework.NewCluster(t, framework.ClusterConfig{Size: size})
			mc := newMemberClients(t, c)
			members := c.Members()

			out, err := c.Etcdctl().Run(ctx, "endpoint", "status", "--cluster", "-w", "json")
			if err != nil || out.ExitCode != 0 {
				t.Fatalf("endpoint status --cluster: %v exit %d: %s", err, out.ExitCode, out.Stderr)
			}
			var statuses []etcdctlEndpointStatus
			if err := json.Unmarshal([]byte(out.Stdout), &statuses); err != nil {
				t.Fatalf("decode endpoint status: %v\n%s", err, out.Stdout)
			}
			if len(statuses) != size {
				t.Fatalf("endpoint status --cluster lists %d endpoints, want %d:\n%s", len(statuses), size, out.Stdout)
			}
			leaders := map[uint64]bool{}
			isLeader := 0
			for _, st := range statuses {
				leaders[st.Status.Leader] = true
				if st.Status.Leader == st.Status.Header.MemberID {
					isLeader++
				}
			}
			if len(leaders) != 1 || leaders[0] || isLeader != 1 {
				t.Fatalf("endpoint status: leaders %v, %d members lead; want one leader everyone agrees on:\n%s", leaders, isLeader, out.Stdout)
			}

			// A write through each member, then linearizable reads of all
			// of them through every other member.
			var lastRev int64
			for i, m := range members {
				resp := mustPut(ctx, t, mc.of(t, m), fmt.Sprintf("/bootstrap/%d", i), "written via "+m.Name())
				lastRev = max(lastRev, resp.Header.Revision)
			}
			for _, reader := range members {
				resp := mustGet(ctx, t, mc.of(t, reader), "/bootstrap/", clientv3.WithPrefix())
				if len(resp.Kvs) != size {
					t.Fatalf("linearizable read on %s sees %d of %d writes", reader.Name(), len(resp.Kvs), size)
				}
				for i, kv := range resp.Kvs {
					if want := "written via " + members[i].Name(); string(kv.Value) != want {
						t.Fatalf("on %s: %s = %q, want %q", reader.Name(), kv.Key, kv.Value, want)
					}
				}
			}
			mc.requireSameHashKV(ctx, t, members, lastRev)
		})
	}
}

// TestClusterLeaseOnFollower grants, keeps alive and queries a lease
// through followers only: keep-alives and time-to-live reach the leader's
// lease clock from any member.
func TestClusterLeaseOnFollower(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	mc := newMemberClients(t, c)
	leader := mc.waitLeader(ctx, t, c.Members())
	followers := others(c.Members(), leader)
	a, b := mc.of(t, followers[0]), mc.of(t, followers[1])

	grant, err := a.Grant(ctx, 5)
	if err != nil {
		t.Fatalf("grant on %s: %v", followers[0].Name(), err)
	}
	mustPut(ctx, t, a, "/lease/key", "v", clientv3.WithLease(grant.ID))
	// Keep it alive well past its TTL through the other follower.
	pace := time.NewTicker(time.Second) // a client's keep-alive pace
	defer pace.Stop()
	for range 7 {
		<-pace.C
		ka, err := b.KeepAliveOnce(ctx, grant.ID)
		if err != nil {
			t.Fatalf("keep-alive on %s: %v", followers[1].Name(), err)
		}
		if ka.TTL <= 0 {
			t.Fatalf("keep-alive on %s: TTL %d, want > 0", followers[1].Name(), ka.TTL)
		}
	}
	ttl, err := a.TimeToLive(ctx, grant.ID, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatalf("time-to-live on %s: %v", followers[0].Name(), err)
	}
	if ttl.TTL <= 0 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != "/lease/key" {
		t.Fatalf("time-to-live after keep-alives: TTL %d keys %q; want alive with /lease/key", ttl.TTL, ttl.Keys)
	}
	if got := mustGet(ctx, t, mc.of(t, leader), "/lease/key"); len(got.Kvs) != 1 {
		t.Fatalf("the leased key is gone on the leader although kept alive")
	}
	// An unknown lease is reported as such through a follower.
	if _, err := b.KeepAliveOnce(ctx, grant.ID+1); err == nil || !strings.Contains(err.Error(), "requested lease not found") {
		t.Fatalf("keep-alive of an unknown lease on a follower: %v, want lease not found", err)
	}
}
