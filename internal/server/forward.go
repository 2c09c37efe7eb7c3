package server

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/transport"
	"github.com/metastore-io/metastore/internal/lease"
)

// Methods of the requests members forward to each other over the peer
// transport. Each handler answers only what this member can answer itself
// (a follower never forwards a forwarded request again), so a request
// cannot loop between members that disagree on who leads.
const (
	// methodLeaseRenew is a single keep-alive, as members of earlier
	// builds forward them; this build forwards methodLeaseRenewBatch.
	methodLeaseRenew      = "lease.renew"
	methodLeaseRenewBatch = "lease.renewbatch"
	methodLeaseTimeToLive = "lease.timetolive"
	methodMemberPromote   = "member.promote"
	methodMemberStatus    = "member.status"
)

// registerForwardHandlers installs this member's side of every forwarded
// request on the transport.
func (s *Server) registerForwardHandlers() error {
	for method, h := range map[string]transport.ForwardHandler{
		methodLeaseRenew:      s.serveLeaseRenew,
		methodLeaseRenewBatch: s.serveLeaseRenewBatch,
		methodLeaseTimeToLive: s.serveLeaseTimeToLive,
		methodMemberPromote:   s.serveMemberPromote,
		methodMemberStatus:    s.serveMemberStatus,
	} {
		if err := s.transport.RegisterForwardHandler(method, h); err != nil {
			return fmt.Errorf("server: register forwarded %s: %w", method, err)
		}
	}
	return nil
}

// forward sends one request to member to over t and decodes its reply. A
// reply carrying an error returns that error; a failure to deliver the
// request or to get the reply is wrapped with errForwardFailed.
func forward(ctx context.Context, t *transport.Transport, to uint64, method string, req marshaler) ([]byte, error) {
	data, err := req.Marshal()
	if err != nil {
		return nil, fmt.Errorf("server: encode %s request: %w", method, err)
	}
	reply, err := t.Forward(ctx, to, method, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s to member %x: %w", errForwardFailed, method, to, err)
	}
	return decodeReply(reply)
}

// forwardTimeToLive takes a time-to-live query from a follower to the
// leader's lease clock over the transport (atLeader); keep-alives go in
// batches (renewBatcher, forward_renew.go).
//
// A request that cannot be delivered (the leader just died, or the
// connection is being re-established) is reported as lease.ErrNotPrimary:
// no primary lessor answered, so the caller retries with whoever leads
// next, within its request timeout, exactly as when the leader itself
// answers that it is not primary yet.
func (s *Server) forwardTimeToLive(ctx context.Context, leader uint64, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	body, err := forward(ctx, s.transport, leader, methodLeaseTimeToLive, r)
	if err != nil {
		return nil, retryableForwardError(err)
	}
	resp := &pb.LeaseTimeToLiveResponse{}
	if err := resp.Unmarshal(body); err != nil {
		return nil, fmt.Errorf("server: decode forwarded time-to-live reply: %w", err)
	}
	return resp, nil
}

// retryableForwardError turns a delivery failure into lease.ErrNotPrimary
// (see forwardTimeToLive); an answer from the leader is kept as it is.
func retryableForwardError(err error) error {
	if isForwardFailure(err) {
		return fmt.Errorf("%w: %w", lease.ErrNotPrimary, err)
	}
	return err
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
		return encodeReply(nil, fmt.Errorf("server: decode forwarded keep-alive: %w", err)), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.reqTimeout)
	defer cancel()
	ttl, err := s.renewAsLeader(ctx, r.ID)
	return encodeMessageReply(&pb.LeaseKeepAliveResponse{ID: r.ID, TTL: ttl}, err), nil
}

func (s *Server) serveLeaseTimeToLive(ctx context.Context, data []byte) ([]byte, error) {
	var r pb.LeaseTimeToLiveRequest
	if err := r.Unmarshal(data); err != nil {
		return encodeReply(nil, fmt.Errorf("server: decode forwarded time-to-live: %w", err)), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.reqTimeout)
	defer cancel()
	if s.node.Leader() != s.id || s.node.LinearizableRead(ctx) != nil {
		return encodeReply(nil, lease.ErrNotPrimary), nil
	}
	resp, err := s.leases.lessor.TimeToLive(r.ID, r.Keys)
	return encodeMessageReply(resp, err), nil
}

func (s *Server) serveMemberPromote(ctx context.Context, data []byte) ([]byte, error) {
	var r pb.MemberPromoteRequest
	if err := r.Unmarshal(data); err != nil {
		return encodeReply(nil, fmt.Errorf("server: decode forwarded promote: %w", err)), nil
	}
	members, err := s.promoteAsLeader(ctx, r.ID)
	return encodeMessageReply(&pb.MemberPromoteResponse{Members: toWireMembers(members)}, err), nil
}

// serveMemberStatus reports this member's raft indexes; the leader asks a
// learner for them before promoting it.
func (s *Server) serveMemberStatus(_ context.Context, _ []byte) ([]byte, error) {
	st := s.node.Status()
	return encodeMessageReply(&pb.StatusResponse{
		Leader:           st.Leader,
		RaftTerm:         st.Term,
		RaftIndex:        st.CommitIndex,
		RaftAppliedIndex: st.AppliedIndex,
		IsLearner:        st.IsLearner,
	}, nil), nil
}
