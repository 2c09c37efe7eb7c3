package e2e

import (
	"regexp"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/test/framework"
)

// etcdVersion is the API version both targets report: MetaStore claims to be
// etcd 3.6 so that clients enable the same features.
var etcdVersion = regexp.MustCompile(`^3\.6\.[0-9]+$`)

func TestStatus(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	mustPut(ctx, t, s.cli, "k", "v")
	st, err := pb.NewMaintenanceClient(s.cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	requireHeader(t, st.Header, 2)
	if !etcdVersion.MatchString(st.Version) {
		t.Errorf("version %q, want 3.6.x", st.Version)
	}
	if st.Leader != st.Header.MemberId {
		t.Errorf("leader %x, want this member %x", st.Leader, st.Header.MemberId)
	}
	if st.RaftTerm == 0 || st.RaftIndex == 0 || st.RaftAppliedIndex == 0 {
		t.Errorf("raft_term=%d raft_index=%d raft_applied_index=%d, want all > 0", st.RaftTerm, st.RaftIndex, st.RaftAppliedIndex)
	}
	if st.RaftAppliedIndex > st.RaftIndex {
		t.Errorf("raft_applied_index %d > raft_index %d", st.RaftAppliedIndex, st.RaftIndex)
	}
	if st.RaftTerm != st.Header.RaftTerm {
		t.Errorf("raft_term %d differs from header raft_term %d", st.RaftTerm, st.Header.RaftTerm)
	}
	if st.DbSize <= 0 {
		t.Errorf("db_size %d, want > 0", st.DbSize)
	}
	if st.IsLearner || len(st.Errors) != 0 {
		t.Errorf("is_learner=%v errors=%q, want false and none", st.IsLearner, st.Errors)
	}

	// Every committed write advances the raft index.
	mustPut(ctx, t, s.cli, "k", "v2")
	st2, err := s.cli.Status(ctx, s.member().ClientURL())
	if err != nil {
		t.Fatalf("status via clientv3: %v", err)
	}
	if st2.RaftIndex <= st.RaftIndex || st2.Header.Revision != 3 {
		t.Errorf("after a write: raft_index %d -> %d, revision %d; want a larger index and revision 3", st.RaftIndex, st2.RaftIndex, st2.Header.Revision)
	}
}

func TestMemberList(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	resp, err := s.cli.MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	if resp.Header.ClusterId == 0 || resp.Header.MemberId == 0 {
		t.Fatalf("member list header: %v", resp.Header)
	}
	if len(resp.Members) != 1 {
		t.Fatalf("%d members, want 1: %v", len(resp.Members), resp.Members)
	}
	m, want := resp.Members[0], s.member()
	if m.ID != resp.Header.MemberId || m.Name != want.Name() || m.IsLearner ||
		!equalStrings(m.PeerURLs, []string{want.PeerURL()}) || !equalStrings(m.ClientURLs, []string{want.ClientURL()}) {
		t.Fatalf("member %+v, want id %x name %q peer %q client %q", m, resp.Header.MemberId, want.Name(), want.PeerURL(), want.ClientURL())
	}

	st, err := s.cli.Status(ctx, want.ClientURL())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.Header.ClusterId != resp.Header.ClusterId || st.Leader != m.ID {
		t.Fatalf("status cluster_id %x leader %x, member list cluster_id %x member %x", st.Header.ClusterId, st.Leader, resp.Header.ClusterId, m.ID)
	}
}
