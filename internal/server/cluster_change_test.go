package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/memory"
)

// keptBackend is a memory engine that outlives its server: Close keeps the
// data, so a restarted member holds every entry it applied before, as a
// persistent engine does after a crash beyond its last snapshot.
type keptBackend struct{ *memory.Backend }

func (keptBackend) Close() error { return nil }

// learnerChange is a conf change adding a learner with these peer URLs,
// as MemberAdd builds it, but with the ID given.
func learnerChange(t *testing.T, id uint64, peerURLs ...string) raftpb.ConfChange {
	t.Helper()
	m := &membershippb.Member{ID: id, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: peerURLs, IsLearner: true}}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode, NodeID: id, Context: data}
}

// requireRaftFollowsMembers checks that m's raft configuration is its
// member list: the same voters and the same learners.
func requireRaftFollowsMembers(t *testing.T, m *testMember) {
	t.Helper()
	var voters, learners []uint64
	for _, mem := range m.srv.Members() {
		if mem.RaftAttributes != nil && mem.RaftAttributes.IsLearner {
			learners = append(learners, mem.ID)
		} else {
			voters = append(voters, mem.ID)
		}
	}
	st := m.srv.node.Status()
	slices.Sort(st.Voters)
	slices.Sort(st.Learners)
	if !slices.Equal(st.Voters, voters) || !slices.Equal(st.Learners, learners) {
		t.Fatalf("%s: raft has voters %x learners %x, the member list voters %x learners %x",
			m.name, st.Voters, st.Learners, voters, learners)
	}
}

// waitAppliedEverywhere waits until every member applied everything
// committed before the call: it writes key through each member, then
// makes a linearizable read on each.
func waitAppliedEverywhere(ctx context.Context, t *testing.T, ms []*testMember, key string) {
	t.Helper()
	for _, m := range ms {
		if _, err := m.srv.Put(ctx, &pb.PutRequest{Key: []byte(key)}); err != nil {
			t.Fatalf("put through %s: %v", m.name, err)
		}
	}
	for _, m := range ms {
		if err := m.srv.LinearizableRead(ctx); err != nil {
			t.Fatalf("read on %s: %v", m.name, err)
		}
	}
}

// Conflicting membership changes proposed past the proposers' own checks
// (as when two members accept them at the same moment) both commit; the
// second is refused when applied, on every member alike, and raft's
// configuration leaves it out too. A restarted member that holds these
// entries already replays them with the same outcome.
func TestConflictingConfChangesAreVetoed(t *testing.T) {
	ms := startTestClusterWith(t, 3, func(cfg *Config) {
		cfg.Backend = keptBackend{memory.New()}
		cfg.SnapshotCount = 100000 // raft replays every entry on restart
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	const sharedURL = "http://127.0.0.1:1"
	const first, second = 0xa1, 0xa2

	// configure skips the proposer's checks (MemberAdd makes them), so
	// both entries commit; the second waits for the first to be applied
	// everywhere, since raft ignores a conf change proposed while another
	// is unapplied.
	if _, err := ms[0].srv.configure(ctx, learnerChange(t, first, sharedURL)); err != nil {
		t.Fatalf("first add: %v", err)
	}
	waitAppliedEverywhere(ctx, t, ms, "after-first-add")
	if _, err := ms[1].srv.configure(ctx, learnerChange(t, second, sharedURL)); !errors.Is(err, membership.ErrPeerURLExists) {
		t.Fatalf("second add of the same peer URL: %v, want ErrPeerURLExists", err)
	}
	waitAppliedEverywhere(ctx, t, ms, "after-second-add")
	for _, m := range ms {
		if m.srv.cluster.Member(first) == nil || m.srv.cluster.Member(second) != nil {
			t.Fatalf("%s lists %v, want %x and not %x", m.name, m.srv.Members(), first, second)
		}
		requireRaftFollowsMembers(t, m)
	}

	// Two removals of one member: the second finds it removed.
	remove := raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode, NodeID: first}
	if _, err := ms[2].srv.configure(ctx, remove); err != nil {
		t.Fatalf("remove: %v", err)
	}
	waitAppliedEverywhere(ctx, t, ms, "after-remove")
	if _, err := ms[0].srv.configure(ctx, remove); !errors.Is(err, membership.ErrIDRemoved) {
		t.Fatalf("second removal: %v, want ErrIDRemoved", err)
	}
	waitAppliedEverywhere(ctx, t, ms, "after-second-remove")
	for _, m := range ms {
		requireRaftFollowsMembers(t, m)
	}

	// Against its list as it is now, the member would refuse the first add
	// (ID removed) and accept the second (the URL is free again); only the
	// recorded decisions rebuild raft's configuration right.
	restarted := ms[2]
	addr := restarted.listener.Addr().String()
	restarted.stop()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	restarted.listener = l
	restarted.start(t)
	restarted.waitReady(t)
	waitAppliedEverywhere(ctx, t, ms, "after-restart")
	for _, m := range ms {
		requireRaftFollowsMembers(t, m)
	}
}

// A member that lost its leader fails proposals as etcd does: after the
// request timeout, with the bare context deadline (gRPC DeadlineExceeded),
// whatever the request; a linearizable read fails then too, with etcd's
// ErrTimeout ("etcdserver: request timed out").
func TestProposalWithoutLeaderTimesOutAsEtcd(t *testing.T) {
	ms := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	survivor := ms[0]
	for _, m := range ms[1:] {
		m.stop()
	}
	eventually(t, "the survivor to lose its leader", func() bool { return survivor.srv.Leader() == 0 })

	s := survivor.srv
	requests := map[string]func() error{
		"put": func() error {
			_, err := s.Put(ctx, &pb.PutRequest{Key: []byte("k")})
			return err
		},
		"txn": func() error {
			_, err := s.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k")}}}}})
			return err
		},
		"delete": func() error {
			_, err := s.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("k")})
			return err
		},
		"lease grant": func() error {
			_, err := s.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 10})
			return err
		},
		"linearizable read": func() error { return s.LinearizableRead(ctx) },
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(requests))
	for name, req := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := req()
			took := time.Since(start)
			switch {
			case name == "linearizable read" && !errors.Is(err, ErrTimeout):
				errs <- fmt.Errorf("%s without a leader: %v, want ErrTimeout", name, err)
			case name != "linearizable read" && !errors.Is(err, context.DeadlineExceeded):
				errs <- fmt.Errorf("%s without a leader: %v, want context.DeadlineExceeded", name, err)
			case took < s.reqTimeout:
				errs <- fmt.Errorf("%s without a leader failed after %v, before the request timeout %v", name, took, s.reqTimeout)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
