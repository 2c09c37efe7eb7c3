package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/faults/clockfault"
	"github.com/metastore-io/metastore/internal/lease"
	"github.com/metastore-io/metastore/internal/statemachine"
)

// leaseRetryInterval paces the retries of a keep-alive or time-to-live
// that found no primary lessor to answer it (an election in progress, or
// a new leader still applying the previous term): etcd's 50 ms.
const leaseRetryInterval = 50 * time.Millisecond

// memberLeases wires the lease table into the member (the state machine
// applies the lease entries to it): it promotes or demotes the lessor as
// leadership moves and routes keep-alives and TTL queries to the primary
// (untilAnswered). The lessor's proposals go through leaseProposer.
type memberLeases struct {
	id              uint64 // this member
	lessor          *lease.Lessor
	electionTimeout time.Duration
	reqTimeout      time.Duration
	stopping        <-chan struct{} // closed when the member begins to stop

	mu     sync.Mutex
	leader uint64 // as last reported by raft's OnLeaderChange
	term   uint64
	// changed is closed, and replaced, when the leader changes: a
	// keep-alive waiting to retry goes to the new leader at once.
	changed chan struct{}
}

// leaseRaft is how the lessor's decisions reach raft: the member's
// propose and a ReadIndex round. The lessor is built before raft (apply
// needs its table, and raft needs apply), yet proposes through raft, so
// this is the one way back, and the Server implements it. The lessor
// calls it only once started (Lessor.Start, after raft runs) and from
// Renew, which only request paths call, and they are served once raft
// runs.
type leaseRaft interface {
	propose(ctx context.Context, req *pb.InternalRaftRequest) (statemachine.Result, error)
	readIndex(ctx context.Context) error
}

// newMemberLeases builds the lease table of member id; stopping is the
// member's, closed when it begins to stop.
func newMemberLeases(cfg Config, log *slog.Logger, id uint64, reqTimeout time.Duration, stopping <-chan struct{}, raft leaseRaft) (*memberLeases, error) {
	ml := &memberLeases{
		id:              id,
		electionTimeout: time.Duration(cfg.ElectionTicks) * cfg.TickInterval,
		reqTimeout:      reqTimeout,
		stopping:        stopping,
		changed:         make(chan struct{}),
	}
	l, err := lease.New(lease.Config{
		Logger:               log.With("component", "lessor"),
		Metrics:              cfg.Metrics,
		Proposer:             leaseProposer{leases: ml, raft: raft},
		Clock:                clockfault.LeaseClock(), // nil but in the fault-injection build
		MinTTL:               lease.MinTTL(cfg.ElectionTicks, cfg.TickInterval),
		ExpiredRetryInterval: reqTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("server: create lessor: %w", err)
	}
	ml.lessor = l
	return ml, nil
}

// leaderChanged is raft's OnLeaderChange: a member that stops leading
// stops its lease clock at once. Promotion waits for the new term's first
// entry to apply (leaderEntryApplied).
func (ml *memberLeases) leaderChanged(leader, term uint64) {
	ml.mu.Lock()
	ml.leader, ml.term = leader, term
	close(ml.changed)
	ml.changed = make(chan struct{})
	ml.mu.Unlock()
	if leader != ml.id {
		ml.lessor.Demote()
	}
}

// leaderEntryApplied is called by apply for each empty entry, which a new
// leader appends at the start of its term. Once this member's own entry
// applies, every entry of earlier terms has applied (every grant, revoke
// and checkpoint they hold is in the table) and the lessor is promoted,
// its clocks extended by an election timeout as etcd does. It reports
// whether this member leads in term.
func (ml *memberLeases) leaderEntryApplied(term uint64) (leading bool) {
	ml.mu.Lock()
	leading = ml.leader == ml.id && ml.term == term
	ml.mu.Unlock()
	if leading {
		ml.lessor.Promote(ml.electionTimeout)
	}
	return leading
}

func (ml *memberLeases) currentLeader() uint64 {
	leader, _ := ml.leaderAndChange()
	return leader
}

// leaderAndChange is the current leader and a channel closed when it
// changes.
func (ml *memberLeases) leaderAndChange() (uint64, <-chan struct{}) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.leader, ml.changed
}

// leaseProposer is the lessor's lease.Proposer.
type leaseProposer struct {
	leases *memberLeases
	raft   leaseRaft
}

// ConfirmLeadership is etcd's ensureLeadership: a ReadIndex round proves
// a quorum still follows this member.
func (p leaseProposer) ConfirmLeadership(ctx context.Context) bool {
	ml := p.leases
	if ml.currentLeader() != ml.id {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, ml.reqTimeout)
	defer cancel()
	if err := p.raft.readIndex(ctx); err != nil {
		return false
	}
	return ml.currentLeader() == ml.id
}

// ProposeRevoke revokes an expired lease through Raft.
func (p leaseProposer) ProposeRevoke(ctx context.Context, id int64) error {
	// The member revokes as root (etcd's WithRoot): the expiry of a lease
	// is not any user's request.
	_, err := p.raft.propose(withInternalRoot(ctx), &pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: id}})
	return err
}

// ProposeCheckpoint records remaining TTLs through Raft, only while this
// member still leads (etcd's checkpointer).
func (p leaseProposer) ProposeCheckpoint(ctx context.Context, cps []*pb.LeaseCheckpoint) error {
	if !p.ConfirmLeadership(ctx) {
		return lease.ErrNotPrimary
	}
	_, err := p.raft.propose(ctx, &pb.InternalRaftRequest{LeaseCheckpoint: &pb.LeaseCheckpointRequest{Checkpoints: cps}})
	return err
}

// LeaseGrant grants a lease through Raft. The TTL is normalised and, when
// the client leaves the ID to the server, a unique positive ID is chosen
// here, before proposing, so that every member applies the same grant.
func (s *Server) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	if err := s.checkQuota(ctx, r); err != nil {
		return nil, err
	}
	ttl, err := s.leases.lessor.NormalizeTTL(r.TTL)
	if err != nil {
		return nil, err
	}
	req := &pb.LeaseGrantRequest{ID: r.ID, TTL: ttl}
	for req.ID == 0 {
		req.ID = int64(s.reqIDs.Next() & math.MaxInt64)
	}
	res, err := s.propose(ctx, &pb.InternalRaftRequest{LeaseGrant: req})
	if err != nil {
		return nil, err
	}
	return res.Resp.(*pb.LeaseGrantResponse), nil
}

// LeaseRevoke revokes a lease and deletes its keys through Raft.
func (s *Server) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	res, err := s.propose(ctx, &pb.InternalRaftRequest{LeaseRevoke: r})
	if err != nil {
		return nil, err
	}
	return res.Resp.(*pb.LeaseRevokeResponse), nil
}

// LeaseRenew is one keep-alive, answered by the leader's clock
// (atLeader).
func (s *Server) LeaseRenew(ctx context.Context, id int64) (int64, error) {
	ttl, err := atLeader(ctx, s,
		func(ctx context.Context) (int64, error) { return s.leases.lessor.Renew(ctx, id) },
		func(ctx context.Context, leader uint64) (int64, error) { return s.renewals.Renew(ctx, leader, id) })
	if err != nil {
		return -1, err
	}
	return ttl, nil
}

// LeaseTimeToLive reads a lease's remaining TTL from the leader's clock
// (atLeader).
func (s *Server) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	resp, err := atLeader(ctx, s,
		func(context.Context) (*pb.LeaseTimeToLiveResponse, error) {
			return s.leases.lessor.TimeToLive(r.ID, r.Keys)
		},
		func(ctx context.Context, leader uint64) (*pb.LeaseTimeToLiveResponse, error) {
			return s.forwardTimeToLive(ctx, leader, r)
		})
	if err != nil {
		return nil, err
	}
	if resp.Header == nil {
		resp.Header = &pb.ResponseHeader{}
	}
	return resp, nil
}

// atLeader answers a lease request that only the leader's clock can
// answer: the leader runs local once a ReadIndex round confirms it still
// leads and has applied everything committed (etcd's ensureLeadership and
// waitAppliedIndex); a follower forwards it to the leader (remote). Until
// one of them can answer, it retries within the request timeout.
func atLeader[T any](ctx context.Context, s *Server, local func(context.Context) (T, error), remote func(ctx context.Context, leader uint64) (T, error)) (T, error) {
	var res T
	err := s.leases.untilAnswered(ctx, func(ctx context.Context, leader uint64) (bool, error) {
		var err error
		switch {
		case leader == s.id:
			if err = s.node.LinearizableRead(ctx); err != nil {
				return false, nil
			}
			res, err = local(ctx)
		case leader != 0:
			res, err = remote(ctx, leader)
		default:
			return false, nil
		}
		if errors.Is(err, lease.ErrNotPrimary) {
			return false, nil
		}
		return true, err
	})
	return res, err
}

// LeaseLeases lists the leases this member knows (local, as etcd).
func (s *Server) LeaseLeases(ctx context.Context, _ *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	ids := s.leases.lessor.Leases()
	statuses := make([]*pb.LeaseStatus, len(ids))
	for i, id := range ids {
		statuses[i] = &pb.LeaseStatus{ID: id}
	}
	return &pb.LeaseLeasesResponse{Header: &pb.ResponseHeader{Revision: s.kv.Rev()}, Leases: statuses}, nil
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// untilAnswered calls try with the current leader until it reports an
// answer, within the request timeout. Retries are paced, but one follows
// at once when the leader changes: a keep-alive the old leader left
// unanswered goes to the new one as soon as raft knows it.
func (ml *memberLeases) untilAnswered(ctx context.Context, try func(ctx context.Context, leader uint64) (answered bool, err error)) error {
	cctx, cancel := context.WithTimeout(ctx, ml.reqTimeout)
	defer cancel()
	for {
		promoted := ml.lessor.Promoted()
		leader, changed := ml.leaderAndChange()
		answered, err := try(cctx, leader)
		if answered && (cctx.Err() == nil || !isContextError(err)) {
			return err
		}
		var waitPromotion <-chan struct{}
		if leader == ml.id {
			waitPromotion = promoted // leading, but the lessor is not primary yet
		}
		retry := time.NewTimer(leaseRetryInterval)
		select {
		case <-waitPromotion:
		case <-changed:
		case <-retry.C:
		case <-ml.stopping:
			retry.Stop()
			return ErrStopped
		case <-cctx.Done():
			retry.Stop()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if ml.currentLeader() == 0 {
				return ErrNoLeader
			}
			return ErrTimeout
		}
		retry.Stop()
	}
}
