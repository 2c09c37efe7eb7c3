package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/lease"
	"github.com/metastore-io/metastore/internal/memory"

	"github.com/metastore-io/metastore/test/testutil"
)

// testMember is one in-process member of a test cluster, with its peer
// listener served.
type testMember struct {
	name     string
	cfg      Config
	srv      *Server
	listener net.Listener
}

// startTestCluster starts n members on loopback peer listeners and waits
// until all are ready. Everything is stopped when t ends.
func startTestCluster(t *testing.T, n int) []*testMember {
	t.Helper()
	return startTestClusterWith(t, n, nil)
}

// startTestClusterWith is startTestCluster with each member's Config
// passed through tweak first (if not nil).
func startTestClusterWith(t *testing.T, n int, tweak func(*Config)) []*testMember {
	t.Helper()
	members := make([]*testMember, n)
	var initial []membership.InitialMember
	for i := range members {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m := &testMember{name: fmt.Sprintf("m%d", i), listener: l}
		members[i] = m
		initial = append(initial, membership.InitialMember{Name: m.name, PeerURLs: []string{m.peerURL()}})
	}
	for _, m := range members {
		m.cfg = clusterTestConfig(t, m, initial, true)
		if tweak != nil {
			tweak(&m.cfg)
		}
		m.start(t)
	}
	for _, m := range members {
		m.waitReady(t)
	}
	return members
}

func clusterTestConfig(t *testing.T, m *testMember, initial []membership.InitialMember, newCluster bool) Config {
	return Config{
		ClusterVersion:      testClusterVersion,
		ServerVersion:       testServerVersion,
		Name:                m.name,
		DataDir:             t.TempDir(),
		InitialCluster:      initial,
		InitialClusterToken: "cluster-test",
		NewCluster:          newCluster,
		PeerURLs:            []string{m.peerURL()},
		ClientURLs:          []string{"http://" + m.name + ".invalid:2379"},
		SnapshotCount:       50,
		MaxRequestBytes:     1536 * 1024,
		MaxTxnOps:           128,
		TickInterval:        10 * time.Millisecond,
		ElectionTicks:       10,
		Backend:             memory.New(),
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func (m *testMember) peerURL() string { return "http://" + m.listener.Addr().String() }

// start creates the member, which serves its peer listener.
func (m *testMember) start(t *testing.T) {
	t.Helper()
	cfg := m.cfg
	cfg.PeerListeners = []net.Listener{m.listener}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start %s: %v", m.name, err)
	}
	m.srv = s
	t.Cleanup(m.stop)
}

func (m *testMember) stop() { m.srv.Stop() }

func (m *testMember) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-m.srv.Ready():
	case <-m.srv.Done():
		t.Fatalf("%s stopped before it was ready: %v", m.name, m.srv.Err())
	case <-time.After(testTimeout):
		t.Fatalf("%s not ready in time", m.name)
	}
}

// leaderOf waits until every running member agrees on a leader among
// them and returns it.
func leaderOf(t *testing.T, ms []*testMember) *testMember {
	t.Helper()
	var leader *testMember
	eventually(t, "members agree on a leader", func() bool {
		leader = nil
		lead := ms[0].srv.Leader()
		for _, m := range ms {
			if l := m.srv.Leader(); l == 0 || l != lead {
				return false
			}
			if m.srv.ID() == lead {
				leader = m
			}
		}
		return leader != nil
	})
	return leader
}

// eventually polls cond until it holds, failing the test after testTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, testTimeout, what, cond)
}

func testMembersExcept(ms []*testMember, x *testMember) []*testMember {
	var out []*testMember
	for _, m := range ms {
		if m != x {
			out = append(out, m)
		}
	}
	return out
}

func TestClusterServesFromEveryMember(t *testing.T) {
	ms := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	leader := leaderOf(t, ms)
	followers := testMembersExcept(ms, leader)

	for i, m := range ms {
		if _, err := m.srv.Put(ctx, &pb.PutRequest{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(m.name)}); err != nil {
			t.Fatalf("put on %s: %v", m.name, err)
		}
	}
	for _, m := range ms {
		resp, err := m.srv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l")})
		if err != nil || len(resp.Kvs) != 3 {
			t.Fatalf("linearizable range on %s: %v, %v", m.name, resp, err)
		}
	}

	// Leases: granted on one follower, renewed and queried through the
	// other, which forwards to the leader's clock.
	g, err := followers[0].srv.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 30})
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := followers[1].srv.LeaseRenew(ctx, g.ID)
	if err != nil || ttl != 30 {
		t.Fatalf("renew on a follower: ttl %d, %v", ttl, err)
	}
	tl, err := followers[1].srv.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: g.ID})
	if err != nil || tl.TTL <= 0 || tl.GrantedTTL != 30 {
		t.Fatalf("time-to-live on a follower: %+v, %v", tl, err)
	}
	if _, err := followers[1].srv.LeaseRenew(ctx, g.ID+1); !errors.Is(err, lease.ErrLeaseNotFound) {
		t.Fatalf("renew of an unknown lease on a follower: %v, want ErrLeaseNotFound", err)
	}

	// Leadership moves only from the leader, only to a voter.
	if err := followers[0].srv.MoveLeader(ctx, followers[1].srv.ID()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("move-leader on a follower: %v, want ErrNotLeader", err)
	}
	if err := leader.srv.MoveLeader(ctx, 12345); !errors.Is(err, ErrBadLeaderTransferee) {
		t.Fatalf("move-leader to a stranger: %v, want ErrBadLeaderTransferee", err)
	}
	if err := leader.srv.MoveLeader(ctx, followers[0].srv.ID()); err != nil {
		t.Fatalf("move-leader: %v", err)
	}
	if got := leaderOf(t, ms); got != followers[0] {
		t.Fatalf("after move-leader %s leads, want %s", got.name, followers[0].name)
	}

	// HashKV agrees everywhere once everyone applied the same revision.
	rev := leader.srv.Rev()
	var want uint32
	for i, m := range ms {
		if err := m.srv.LinearizableRead(ctx); err != nil {
			t.Fatal(err)
		}
		h, err := m.srv.HashKV(rev)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			want = h.Hash
		} else if h.Hash != want {
			t.Fatalf("hashkv at %d on %s = %d, want %d", rev, m.name, h.Hash, want)
		}
	}
}

func TestClusterMembershipChanges(t *testing.T) {
	ms := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range 120 { // past two snapshots: the learner needs one
		if _, err := ms[i%3].srv.Put(ctx, &pb.PutRequest{Key: []byte(fmt.Sprintf("before/%03d", i))}); err != nil {
			t.Fatal(err)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	joiner := &testMember{name: "m3", listener: l}
	added, members, err := ms[1].srv.MemberAdd(ctx, []string{joiner.peerURL()}, true)
	if err != nil {
		t.Fatalf("add learner: %v", err)
	}
	if len(members) != 4 || !added.RaftAttributes.IsLearner {
		t.Fatalf("after adding a learner: added %+v, members %+v", added, members)
	}
	// The next changes go through other members: each must have applied
	// this one, or it checks them against an older member list and
	// proposes them, and raft drops a conf change proposed while the
	// leader still counts an earlier one unapplied ("possible unapplied
	// conf change"): the request then times out, in etcd too.
	waitAppliedEverywhere(ctx, t, ms, "after-add")
	// (Another URL too: the same URLs within the same second would give
	// the same ID, refused first as ErrIDExists, as in etcd.)
	if _, _, err := ms[2].srv.MemberAdd(ctx, []string{joiner.peerURL(), "http://127.0.0.1:2"}, false); !errors.Is(err, membership.ErrPeerURLExists) {
		t.Fatalf("second add of the same peer URL: %v, want ErrPeerURLExists", err)
	}
	if _, _, err := ms[2].srv.MemberAdd(ctx, []string{"http://127.0.0.1:1"}, true); !errors.Is(err, membership.ErrTooManyLearners) {
		t.Fatalf("second learner: %v, want ErrTooManyLearners", err)
	}
	// Not started: far behind the leader.
	if _, err := ms[2].srv.MemberPromote(ctx, added.ID); !errors.Is(err, ErrLearnerNotReady) {
		t.Fatalf("promote of a learner that never started: %v, want ErrLearnerNotReady", err)
	}

	var initial []membership.InitialMember
	for _, m := range append(ms, joiner) {
		initial = append(initial, membership.InitialMember{Name: m.name, PeerURLs: []string{m.peerURL()}})
	}
	joiner.cfg = clusterTestConfig(t, joiner, initial, false)
	joiner.start(t)
	joiner.waitReady(t)
	if joiner.srv.ID() != added.ID || !joiner.srv.IsLearner() {
		t.Fatalf("joined as %x (learner %v), want learner %x", joiner.srv.ID(), joiner.srv.IsLearner(), added.ID)
	}
	// Promotion goes through (from a follower, forwarded to the leader)
	// once the learner has caught up.
	eventually(t, "the caught-up learner is promoted", func() bool {
		_, err := ms[0].srv.MemberPromote(ctx, added.ID)
		if err != nil && !errors.Is(err, ErrLearnerNotReady) {
			t.Fatalf("promote: %v", err)
		}
		return err == nil
	})
	waitAppliedEverywhere(ctx, t, append(ms, joiner), "after-promote") // the joiner too applied the promotion
	if joiner.srv.IsLearner() {
		t.Fatal("still a learner after promotion")
	}
	if _, err := ms[0].srv.MemberPromote(ctx, added.ID); !errors.Is(err, membership.ErrMemberNotLearner) {
		t.Fatalf("promote of a voter: %v, want ErrMemberNotLearner", err)
	}

	// Remove the leader: it stops on its own, the others go on.
	all := append(ms, joiner)
	leader := leaderOf(t, all)
	rest := testMembersExcept(all, leader)
	if _, err := rest[0].srv.MemberRemove(ctx, leader.srv.ID()); err != nil {
		t.Fatalf("remove the leader: %v", err)
	}
	select {
	case <-leader.srv.Done():
	case <-ctx.Done():
		t.Fatal("the removed leader did not stop")
	}
	if !errors.Is(leader.srv.Err(), ErrRemoved) {
		t.Fatalf("removed leader stopped with %v, want ErrRemoved", leader.srv.Err())
	}
	newLeader := leaderOf(t, rest)
	waitAppliedEverywhere(ctx, t, rest, "after-remove")
	if _, err := newLeader.srv.MemberRemove(ctx, leader.srv.ID()); !errors.Is(err, membership.ErrIDRemoved) {
		t.Fatalf("second removal: %v, want ErrIDRemoved", err)
	}
	if _, err := joiner.srv.Put(ctx, &pb.PutRequest{Key: []byte("after")}); err != nil {
		t.Fatalf("put on the promoted member after the leader's removal: %v", err)
	}
	for _, m := range rest {
		if got := len(m.srv.Members()); got != 3 {
			t.Fatalf("%s lists %d members, want 3", m.name, got)
		}
	}
}
