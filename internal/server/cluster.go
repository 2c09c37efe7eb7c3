package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/forward"
	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// Errors of membership and leadership changes; the texts are etcd's.
var (
	ErrNotEnoughStartedMembers = membererr.ErrNotEnoughStartedMembers
	ErrLearnerNotReady         = membererr.ErrLearnerNotReady
	ErrUnhealthy               = membererr.ErrUnhealthy
	ErrNotLeader               = membererr.ErrNotLeader
	ErrBadLeaderTransferee     = membererr.ErrBadLeaderTransferee
	ErrTimeoutLeaderTransfer   = errors.New("etcdserver: request timed out, leader transfer took too long")
	// ErrRemoved is the error a member stops with once it applied its
	// own removal.
	ErrRemoved = errors.New("the member has been permanently removed from the cluster")
	// errNoTransport refuses membership changes on a member built without
	// a peer transport (tests of a lone member).
	errNoTransport = errors.New("server: membership changes need a peer transport")
)

const (
	// healthInterval is how long a peer's stream must have been up for the
	// peer to count as connected in the quorum checks of
	// --strict-reconfig-check (etcd's HealthInterval).
	healthInterval = 5 * time.Second
	// learnerReadyRatio is how much of the leader's log a learner must have
	// applied before it may be promoted (etcd's readyPercentThreshold).
	learnerReadyRatio = 0.9
	// learnerProbeTimeout bounds asking a learner how far it got: one
	// that cannot answer that quickly is not in sync.
	learnerProbeTimeout = time.Second
	// removedStopDelay lets the conf change that removed this member reach
	// the others before it stops (etcd waits the same second).
	removedStopDelay = time.Second
	// leaderRetryInterval paces retries of requests that must reach the
	// leader while there is none or it is changing.
	leaderRetryInterval = 50 * time.Millisecond
)

// Leader is the leader as this member last learned it; 0 for none.
func (s *Server) Leader() uint64 { return s.leases.currentLeader() }

// IsLearner reports whether this member is a learner.
func (s *Server) IsLearner() bool { return s.learner.Load() }

// ElectionTimeout is --election-timeout.
func (s *Server) ElectionTimeout() time.Duration {
	return time.Duration(s.cfg.ElectionTicks) * s.cfg.TickInterval
}

// MemberAdd adds a member with these peer URLs, as a voter or a learner,
// through a conf change. Its ID is derived from the URLs and the current
// time, as etcd does. It returns the new member and the member list once
// the change is applied here.
func (s *Server) MemberAdd(ctx context.Context, peerURLs []string, isLearner bool) (*membershippb.Member, []*membershippb.Member, error) {
	urls := slices.Clone(peerURLs)
	slices.Sort(urls)
	now := time.Now()
	m := &membershippb.Member{
		ID:             membership.MemberID(urls, "", &now),
		RaftAttributes: &membershippb.RaftAttributes{PeerUrls: urls, IsLearner: isLearner},
	}
	if err := s.mayAddMember(m); err != nil {
		return nil, nil, err
	}
	if err := s.cluster.ValidateAdd(m, s.maxLearners()); err != nil {
		return nil, nil, err
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, nil, fmt.Errorf("server: encode member: %w", err)
	}
	cc := raftpb.ConfChange{Type: raftpb.ConfChangeAddNode, NodeID: m.ID, Context: data}
	if isLearner {
		cc.Type = raftpb.ConfChangeAddLearnerNode
	}
	members, err := s.configure(ctx, cc)
	if err != nil {
		return nil, nil, err
	}
	return m, members, nil
}

// MemberRemove removes a member (the leader included: it keeps leading
// until the change commits, then stops, and the others elect a new one).
func (s *Server) MemberRemove(ctx context.Context, id uint64) ([]*membershippb.Member, error) {
	if err := s.mayRemoveMember(id); err != nil {
		return nil, err
	}
	if err := s.cluster.ValidateRemove(id); err != nil {
		return nil, err
	}
	return s.configure(ctx, raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode, NodeID: id})
}

// MemberUpdate replaces a member's peer URLs.
func (s *Server) MemberUpdate(ctx context.Context, id uint64, peerURLs []string) ([]*membershippb.Member, error) {
	urls := slices.Clone(peerURLs)
	slices.Sort(urls)
	if err := s.cluster.ValidateUpdate(id, urls); err != nil {
		return nil, err
	}
	data, err := (&membershippb.Member{ID: id, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: urls}}).Marshal()
	if err != nil {
		return nil, fmt.Errorf("server: encode member: %w", err)
	}
	return s.configure(ctx, raftpb.ConfChange{Type: raftpb.ConfChangeUpdateNode, NodeID: id, Context: data})
}

// MemberPromote turns a learner into a voter. Only the leader knows how far
// the learner got, so a follower forwards the request to it (as etcd does
// over its peer HTTP API); the leader refuses while the learner has applied
// less than 90% of the log.
func (s *Server) MemberPromote(ctx context.Context, id uint64) ([]*membershippb.Member, error) {
	cctx, cancel := context.WithTimeout(ctx, s.reqTimeout)
	defer cancel()
	for {
		var err error
		var members []*membershippb.Member
		switch leader := s.node.Status().Leader; {
		case leader == s.id:
			members, err = s.promoteAsLeader(cctx, id)
			if !errors.Is(err, ErrNotLeader) {
				s.metrics.observePromote(err)
			}
		case leader != 0 && s.transport != nil:
			members, err = s.forwardPromote(cctx, leader, id)
		default:
			err = ErrNoLeader
		}
		retry := errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || forward.IsFailure(err)
		if !retry {
			return members, err
		}
		if werr := s.waitRetry(ctx, cctx); werr != nil {
			return nil, werr
		}
	}
}

func (s *Server) forwardPromote(ctx context.Context, leader, id uint64) ([]*membershippb.Member, error) {
	body, err := forward.Call(ctx, s.transport, leader, forward.MethodMemberPromote, &pb.MemberPromoteRequest{ID: id})
	if err != nil {
		return nil, err
	}
	var resp pb.MemberPromoteResponse
	if err := resp.Unmarshal(body); err != nil {
		return nil, fmt.Errorf("server: decode forwarded promote reply: %w", err)
	}
	return fromWireMembers(resp.Members), nil
}

// promoteAsLeader checks and proposes a promotion on the leader.
func (s *Server) promoteAsLeader(ctx context.Context, id uint64) ([]*membershippb.Member, error) {
	if s.node.Status().Leader != s.id {
		return nil, ErrNotLeader
	}
	// The membership read below must hold every change committed before
	// this request (a learner whose addition a follower already answered
	// may not be applied here yet).
	if err := s.LinearizableRead(ctx); err != nil {
		return nil, err
	}
	if err := s.cluster.ValidatePromote(id); err != nil {
		return nil, err
	}
	if err := s.learnerReady(ctx, id); err != nil {
		return nil, err
	}
	if s.cfg.StrictReconfigCheck && !s.cluster.ReadyToPromote() {
		return nil, ErrNotEnoughStartedMembers
	}
	// An AddNode for a member that is a learner is a promotion
	// (internal/statemachine, membership.go).
	data, err := (&membershippb.Member{ID: id}).Marshal()
	if err != nil {
		return nil, fmt.Errorf("server: encode member: %w", err)
	}
	return s.configure(ctx, raftpb.ConfChange{Type: raftpb.ConfChangeAddNode, NodeID: id, Context: data})
}

// learnerReady asks the learner how far it has applied and compares that
// with this leader's commit index. A learner that cannot be asked is not
// ready, as a learner raft has no progress for is not in etcd.
func (s *Server) learnerReady(ctx context.Context, id uint64) error {
	if s.transport == nil {
		return ErrLearnerNotReady
	}
	ctx, cancel := context.WithTimeout(ctx, learnerProbeTimeout)
	defer cancel()
	body, err := forward.Call(ctx, s.transport, id, forward.MethodMemberStatus, &pb.StatusRequest{})
	if err != nil {
		s.log.Warn("rejecting promote: cannot reach the learner", "learner", fmt.Sprintf("%x", id), "error", err)
		return ErrLearnerNotReady
	}
	var st pb.StatusResponse
	if err := st.Unmarshal(body); err != nil {
		return fmt.Errorf("server: decode learner status: %w", err)
	}
	leaderIndex := s.node.Status().CommitIndex
	ratio := float64(st.RaftAppliedIndex) / float64(max(leaderIndex, 1))
	if ratio < learnerReadyRatio {
		s.log.Warn("rejecting promote: learner is not ready", "learner", fmt.Sprintf("%x", id),
			"learner-applied-index", st.RaftAppliedIndex, "leader-commit-index", leaderIndex)
		return ErrLearnerNotReady
	}
	return nil
}

// MoveLeader hands leadership to transferee and waits until it leads. Only
// the leader can do it (etcdctl move-leader finds the leader first).
func (s *Server) MoveLeader(ctx context.Context, transferee uint64) error {
	if s.node.Status().Leader != s.id {
		return ErrNotLeader
	}
	if m := s.cluster.Member(transferee); m == nil || (m.RaftAttributes != nil && m.RaftAttributes.IsLearner) {
		return ErrBadLeaderTransferee
	}
	cctx, cancel := context.WithTimeout(ctx, s.reqTimeout)
	defer cancel()
	start := time.Now()
	if err := s.node.TransferLeadership(cctx, transferee); err != nil {
		if errors.Is(err, raftnode.ErrStopped) {
			return ErrStopped
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return ErrTimeoutLeaderTransfer
	}
	s.log.Info("leadership transferred", "transferee", fmt.Sprintf("%x", transferee), "took", time.Since(start))
	return nil
}

// transferLeadershipOnStop hands leadership to the longest-connected voter
// before a leader stops gracefully, so the cluster does not wait an
// election timeout to notice (etcd's TryTransferLeadershipOnShutdown).
func (s *Server) transferLeadershipOnStop() {
	select {
	case <-s.stopping:
		return
	default:
	}
	if s.transport == nil || s.node.Status().Leader != s.id {
		return
	}
	var best uint64
	var oldest time.Time
	for _, m := range s.cluster.VotingMembers() {
		if m.ID == s.id {
			continue
		}
		since := s.activeSince(m.ID)
		if since.IsZero() {
			continue
		}
		if best == 0 || since.Before(oldest) {
			best, oldest = m.ID, since
		}
	}
	if best == 0 {
		return
	}
	// raft abandons a transfer after an election timeout; waiting much
	// longer would only delay the stop (the transferee may have just died).
	ctx, cancel := context.WithTimeout(context.Background(), 3*s.ElectionTimeout())
	defer cancel()
	if err := s.MoveLeader(ctx, best); err != nil {
		s.log.Warn("leadership transfer before stopping failed", "transferee", fmt.Sprintf("%x", best), "error", err)
	}
}

// configure proposes a conf change and waits until it is applied here; the
// state machine answers with the member list or the reason the change was void.
func (s *Server) configure(ctx context.Context, cc raftpb.ConfChange) ([]*membershippb.Member, error) {
	if s.transport == nil {
		return nil, errNoTransport
	}
	cc.ID = s.reqIDs.Next()
	ch := s.wait.Register(cc.ID)
	cctx, cancel := context.WithTimeout(ctx, s.reqTimeout)
	defer cancel()
	start := time.Now()
	if err := s.node.ProposeConfChange(cctx, cc); err != nil {
		s.wait.Cancel(cc.ID)
		return nil, s.proposeError(ctx, cctx, err, start)
	}
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		s.log.Info("applied a configuration change through raft", "type", cc.Type.String(), "node", fmt.Sprintf("%x", cc.NodeID))
		return res.Resp.([]*membershippb.Member), nil
	case <-cctx.Done():
		s.wait.Cancel(cc.ID)
		return nil, s.proposeError(ctx, cctx, cctx.Err(), start)
	case <-s.stopping:
		s.wait.Cancel(cc.ID)
		return nil, ErrStopped
	case <-s.node.Done():
		// The raft node failed (a disk error): nothing will be applied,
		// and the member stops once its clients are drained.
		s.wait.Cancel(cc.ID)
		return nil, ErrStopped
	}
}

func (s *Server) maxLearners() int {
	if s.cfg.MaxLearners <= 0 {
		return membership.DefaultMaxLearners
	}
	return s.cfg.MaxLearners
}

// mayAddMember is etcd's --strict-reconfig-check for additions: a new
// voter must not leave fewer started voters than a quorum, and this member
// must be connected to a quorum of the grown cluster (the new member
// counted as down).
func (s *Server) mayAddMember(m *membershippb.Member) error {
	if !s.cfg.StrictReconfigCheck {
		return nil
	}
	if !m.RaftAttributes.IsLearner && !s.cluster.ReadyToAddVoter() {
		return ErrNotEnoughStartedMembers
	}
	voters := s.cluster.VotingMembers()
	if len(voters) > 1 && s.connectedSince(time.Now().Add(-healthInterval), voters) < quorum(len(voters)+1) {
		return ErrUnhealthy
	}
	return nil
}

// mayRemoveMember is etcd's --strict-reconfig-check for removals: the
// remaining voters must keep a started quorum, and unless the member is
// down already, this member must stay connected to a quorum of them.
func (s *Server) mayRemoveMember(id uint64) error {
	if !s.cfg.StrictReconfigCheck {
		return nil
	}
	if m := s.cluster.Member(id); m != nil && m.RaftAttributes != nil && m.RaftAttributes.IsLearner {
		return nil
	}
	if !s.cluster.ReadyToRemoveVoter(id) {
		return ErrNotEnoughStartedMembers
	}
	if s.transport == nil {
		return nil
	}
	if id != s.id && s.activeSince(id).IsZero() {
		return nil // a member that is down is not part of the active quorum
	}
	voters := s.cluster.VotingMembers()
	active := s.connectedSince(time.Now().Add(-healthInterval), voters)
	if active-1 < quorum(len(voters)-1) {
		return ErrUnhealthy
	}
	return nil
}

// connectedSince counts the members (this one included) this member has
// had a working connection to since before since.
func (s *Server) connectedSince(since time.Time, members []*membershippb.Member) int {
	n := 0
	for _, m := range members {
		if m.ID == s.id {
			n++
			continue
		}
		if s.transport == nil {
			continue
		}
		if t := s.activeSince(m.ID); !t.IsZero() && t.Before(since) {
			n++
		}
	}
	return n
}

func quorum(n int) int { return n/2 + 1 }

// waitRetry paces a retry loop bounded by cctx; when cctx ends it returns
// the caller's context error, or ErrTimeout.
func (s *Server) waitRetry(callerCtx, cctx context.Context) error {
	t := time.NewTimer(leaderRetryInterval)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.stopping:
		return ErrStopped
	case <-cctx.Done():
		if callerCtx.Err() != nil {
			return callerCtx.Err()
		}
		return ErrTimeout
	}
}

// toWireMembers and fromWireMembers convert the member list to and from
// the client protocol's form, which the promote forward carries.
func toWireMembers(ms []*membershippb.Member) []*pb.Member {
	out := make([]*pb.Member, len(ms))
	for i, m := range ms {
		pm := &pb.Member{ID: m.ID}
		if m.RaftAttributes != nil {
			pm.PeerURLs, pm.IsLearner = m.RaftAttributes.PeerUrls, m.RaftAttributes.IsLearner
		}
		if m.MemberAttributes != nil {
			pm.Name, pm.ClientURLs = m.MemberAttributes.Name, m.MemberAttributes.ClientUrls
		}
		out[i] = pm
	}
	return out
}

func fromWireMembers(ms []*pb.Member) []*membershippb.Member {
	out := make([]*membershippb.Member, len(ms))
	for i, pm := range ms {
		out[i] = &membershippb.Member{
			ID:               pm.ID,
			RaftAttributes:   &membershippb.RaftAttributes{PeerUrls: pm.PeerURLs, IsLearner: pm.IsLearner},
			MemberAttributes: &membershippb.Attributes{Name: pm.Name, ClientUrls: pm.ClientURLs},
		}
	}
	return out
}
