package server

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/forward"
	"github.com/metastore-io/metastore/internal/cluster/transport"
	"github.com/metastore-io/metastore/internal/lease"
)

// registerForwardHandlers installs this member's side of every forwarded
// request on the transport.
func (s *Server) registerForwardHandlers() error {
	for method, h := range map[string]transport.ForwardHandler{
		forward.MethodLeaseRenew:      s.serveLeaseRenew,
		forward.MethodLeaseRenewBatch: s.serveLeaseRenewBatch,
		forward.MethodLeaseTimeToLive: s.serveLeaseTimeToLive,
		forward.MethodMemberPromote:   s.serveMemberPromote,
		forward.MethodMemberStatus:    s.serveMemberStatus,
	} {
		if err := s.transport.RegisterForwardHandler(method, h); err != nil {
			return fmt.Errorf("server: register forwarded %s: %w", method, err)
		}
	}
	return nil
}

// forwardTimeToLive takes a time-to-live query from a follower to the
// leader's lease clock over the transport (atLeader); keep-alives go in
// batches (forward.RenewBatcher).
//
// A request that cannot be delivered (the leader just died, or the
// connection is being re-established) is reported as lease.ErrNotPrimary:
// no primary lessor answered, so the caller retries with whoever leads
// next, within its request timeout, exactly as when the leader itself
// answers that it is not primary yet.
func (s *Server) forwardTimeToLive(ctx context.Context, leader uint64, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	body, err := forward.Call(ctx, s.transport, leader, forward.MethodLeaseTimeToLive, r)
	if err != nil {
		return nil, forward.Retryable(err)
	}
	resp := &pb.LeaseTimeToLiveResponse{}
	if err := resp.Unmarshal(body); err != nil {
		return nil, fmt.Errorf("server: decode forwarded time-to-live reply: %w", err)
	}
	return resp, nil
}

// renewAsLeader renews a lease on this member's clock if it leads: a
// ReadIndex round proves it still does and that it applied every grant
// and revoke committed before (etcd's ensureLeadership).
func (s *Server) renewAsLeader(ctx context.Context, id int64) (int64, error) {
	if s.node.Leader() != s.id {
		return -1, lease.ErrNotPrimary
	}
	if err := s.node.LinearizableRead(ctx); err != nil {
		return -1, lease.ErrNotPrimary
	}
	return s.leases.lessor.Renew(ctx, id)
}

func (s *Server) serveLeaseRenew(ctx context.Context, data []byte) ([]byte, error) {
	var r pb.LeaseKeepAliveRequest
	if err := r.Unmarshal(data); err != nil {
		return forward.EncodeReply(nil, fmt.Errorf("server: decode forwarded keep-alive: %w", err)), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.reqTimeout)
	defer cancel()
	ttl, err := s.renewAsLeader(ctx, r.ID)
	return forward.EncodeMessageReply(&pb.LeaseKeepAliveResponse{ID: r.ID, TTL: ttl}, err), nil
}

func (s *Server) serveLeaseTimeToLive(ctx context.Context, data []byte) ([]byte, error) {
	var r pb.LeaseTimeToLiveRequest
	if err := r.Unmarshal(data); err != nil {
		return forward.EncodeReply(nil, fmt.Errorf("server: decode forwarded time-to-live: %w", err)), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.reqTimeout)
	defer cancel()
	if s.node.Leader() != s.id || s.node.LinearizableRead(ctx) != nil {
		return forward.EncodeReply(nil, lease.ErrNotPrimary), nil
	}
	resp, err := s.leases.lessor.TimeToLive(r.ID, r.Keys)
	return forward.EncodeMessageReply(resp, err), nil
}

func (s *Server) serveMemberPromote(ctx context.Context, data []byte) ([]byte, error) {
	var r pb.MemberPromoteRequest
	if err := r.Unmarshal(data); err != nil {
		return forward.EncodeReply(nil, fmt.Errorf("server: decode forwarded promote: %w", err)), nil
	}
	members, err := s.promoteAsLeader(ctx, r.ID)
	return forward.EncodeMessageReply(&pb.MemberPromoteResponse{Members: toWireMembers(members)}, err), nil
}

// serveMemberStatus reports this member's raft indexes; the leader asks a
// learner for them before promoting it.
func (s *Server) serveMemberStatus(_ context.Context, _ []byte) ([]byte, error) {
	st := s.node.Status()
	return forward.EncodeMessageReply(&pb.StatusResponse{
		Leader:           st.Leader,
		RaftTerm:         st.Term,
		RaftIndex:        st.CommitIndex,
		RaftAppliedIndex: st.AppliedIndex,
		IsLearner:        st.IsLearner,
	}, nil), nil
}
