package lockservice

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// leaseTTL and electionTimeout are the service's and the member's
	// defaults.
	leaseTTL        = 5 * time.Second
	electionTimeout = time.Second
	// followerDeathBound is the documented bound for a lock whose
	// member, a follower, dies: the leader expires the lease at most
	// LeaseTTL after its last renewal.
	followerDeathBound = leaseTTL
	// leaderDeathBound is the documented bound when that member is the
	// leader: the survivors elect a new one within two election timeouts
	// (each waits a randomized one to two before it campaigns), and the
	// new leader, as etcd's, starts every lease's clock again at a whole
	// TTL plus one election timeout.
	leaderDeathBound = leaseTTL + 3*electionTimeout
	// deathMargin is added to both for the revoke's commit, the waiter's
	// watch event and a loaded two-core machine.
	deathMargin = time.Second
	// deathRuns is how many times each case is measured.
	deathRuns = 4
)

// TestLockReleasedAfterMemberDeath measures how long a lock outlives the
// member serving its holder's connection when that member is killed -9:
// the holder is on the dying member, a waiter on another, and the time
// is from the kill to the waiter's grant. Nobody revokes the holder's
// lease, so it goes when it expires: within LeaseTTL when the member was
// a follower, within LeaseTTL plus the election when it was the leader.
func TestLockReleasedAfterMemberDeath(t *testing.T) {
	requireMetaStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*deathRuns*testTimeout)
	defer cancel()
	cluster := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	clis := map[*framework.Member]*clientv3.Client{}
	for _, m := range cluster.Members() {
		clis[m] = m.NewClient(t)
	}
	took := map[bool][]time.Duration{}
	for run := range 2 * deathRuns {
		leaderDies := run%2 == 0
		took[leaderDies] = append(took[leaderDies], releaseAfterDeath(ctx, t, cluster, clis, leaderDies, run))
	}
	for _, leaderDies := range []bool{false, true} {
		bound, who := followerDeathBound, "follower"
		if leaderDies {
			bound, who = leaderDeathBound, "leader"
		}
		t.Logf("death of the %s serving the holder: waiter granted after %v (documented bound %v)", who, took[leaderDies], bound)
		for _, d := range took[leaderDies] {
			if d > bound+deathMargin {
				t.Errorf("death of the %s: the waiter got the lock %v after the kill, want at most %v (+%v margin)", who, d, bound, deathMargin)
			}
		}
	}
}

// releaseAfterDeath runs one measurement: a holder on the leader (or on a
// follower), a waiter on a follower that survives, the holder's member
// killed; it returns the time from the kill to the waiter's grant, after
// restarting the member.
func releaseAfterDeath(ctx context.Context, t *testing.T, cluster *framework.Cluster, clis map[*framework.Member]*clientv3.Client, leaderDies bool, run int) time.Duration {
	t.Helper()
	leader := findLeader(ctx, t, cluster.Members(), clis)
	var followers []*framework.Member
	for _, m := range cluster.Members() {
		if m != leader {
			followers = append(followers, m)
		}
	}
	victim, waiterOn := leader, followers[0]
	if !leaderDies {
		victim, waiterOn = followers[0], followers[1]
	}
	resource := fmt.Sprintf("r%d", run)
	holder := newService(t, cluster, victim).lock(ctx, "death", resource, "holder")
	defer holder.Close()
	w := newService(t, cluster, waiterOn).enqueue(ctx, "death", resource, "waiter")

	killed := time.Now()
	if _, err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	l := w.acquired(t, ctx)
	took := time.Since(killed)
	if l.Token() <= holder.Token() {
		t.Fatalf("run %d: token %d after %d", run, l.Token(), holder.Token())
	}
	unlock(t, ctx, l)
	if err := victim.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	return took
}
