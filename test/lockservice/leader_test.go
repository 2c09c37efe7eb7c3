package lockservice

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/lockapi"
	"github.com/metastore-io/metastore/test/framework"
)

// TestLockServiceSurvivesLeaderFaults: on three members, a lock taken
// through one follower and a waiter queued through the other stay in
// place while the leader is killed, or cut off from its peers for 12 s
// (the clients stay connected to the followers), and a new one is
// elected; the holder then unlocks through the other member, and the
// waiter gets the lock with a larger token. The followers' renewals reach
// the new leader within the holder's validity, so a partition costs the
// lock no more than a death does.
func TestLockServiceSurvivesLeaderFaults(t *testing.T) {
	requireMetaStore(t)
	for _, fault := range []string{"kill", "isolate", "stall"} {
		t.Run(fault, func(t *testing.T) { survivesLeaderFault(t, fault) })
	}
}

// partitionHold is how long the partition cases keep the leader cut off:
// over two lease TTLs, so that only renewals through the new leader can
// keep the lock.
const partitionHold = 12 * time.Second

func survivesLeaderFault(t *testing.T, fault string) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cluster := framework.NewCluster(t, framework.ClusterConfig{Size: 3, PeerProxies: fault != "kill"})
	clis := map[*framework.Member]*clientv3.Client{}
	for _, m := range cluster.Members() {
		clis[m] = m.NewClient(t)
	}
	leader := findLeader(ctx, t, cluster.Members(), clis)
	var followers []*framework.Member
	for _, m := range cluster.Members() {
		if m != leader {
			followers = append(followers, m)
		}
	}
	a, b := newService(t, cluster, followers[0]), newService(t, cluster, followers[1])
	holder := a.lock(ctx, "failover", "r", "holder")
	w := b.enqueue(ctx, "failover", "r", "waiter")

	hold := releaseBound + time.Second
	switch fault {
	case "kill":
		if _, err := leader.Kill(); err != nil {
			t.Fatal(err)
		}
	case "isolate": // its peer connections refused
		cluster.Network().Isolate(leader.Name())
		defer cluster.Network().Heal(leader.Name())
		hold = partitionHold
	case "stall": // its peer connections open, forwarding nothing
		cluster.Network().Stall(leader.Name())
		defer cluster.Network().Heal(leader.Name())
		hold = partitionHold
	}
	cut := time.Now()
	findLeader(ctx, t, followers, clis)
	// Past a whole lease TTL after the fault (the whole partition), the
	// lock must still be held: the surviving members kept renewing it
	// through the election. Nothing is to happen here, so the test waits
	// out the time.
	select {
	case <-holder.Lost():
		t.Fatalf("the holder lost the lock %v after the leader's %s: %v", time.Since(cut).Round(time.Millisecond), fault, holder.Err())
	case <-time.After(time.Until(cut.Add(hold))):
	}
	st := b.status(ctx, "failover", "r")
	if st.Holder == nil || st.Holder.NodeID != "holder" || st.Holder.Token != holder.Token() ||
		len(st.Waiters) != 1 || st.Waiters[0].NodeID != "waiter" || !w.pending() {
		t.Fatalf("after the leader %s: %+v, want holder (token %d) then waiter", fault, st, holder.Token())
	}
	code, body := b.post(ctx, lockapi.PathUnlock, `{"Type":"failover","ResourceID":"r","NodeID":"holder","Success":true}`)
	if code != 200 {
		t.Fatalf("unlock through the other member: %d %s", code, body)
	}
	next := w.acquired(t, ctx)
	if next.Token() <= holder.Token() {
		t.Fatalf("token %d after %d", next.Token(), holder.Token())
	}
	holder.Close()
	unlock(t, ctx, next)
}

// findLeader waits until one of ms says it is the leader and every other
// member of ms follows it.
func findLeader(ctx context.Context, t *testing.T, ms []*framework.Member, clis map[*framework.Member]*clientv3.Client) *framework.Member {
	t.Helper()
	for {
		var leaderID uint64
		var leader *framework.Member
		agreed := true
		for _, m := range ms {
			st, err := memberStatus(ctx, clis[m], m)
			if err != nil || st.Leader == 0 || (leaderID != 0 && st.Leader != leaderID) {
				agreed = false
				break
			}
			leaderID = st.Leader
			if st.Header.MemberId == st.Leader {
				leader = m
			}
		}
		if agreed && leader != nil {
			return leader
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no agreed leader: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
