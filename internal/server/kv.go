package server

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/raftnode"
	"github.com/metastore-io/metastore/internal/statemachine"
	"github.com/metastore-io/metastore/internal/statemachine/wait"
)

// maxApplyLag bounds how far apply may trail commit before new proposals
// are refused with ErrTooManyRequests (etcd's maxGapBetweenApplyAndCommitIndex),
// so an overloaded member sheds load instead of queueing without bound.
const maxApplyLag = 5000

// Range serves a read. A linearizable read first waits until this member
// has applied everything committed when the read arrived (batched ReadIndex);
// a serializable one reads local state at once.
func (s *Server) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	start := time.Now()
	if !r.Serializable {
		if err := s.LinearizableRead(ctx); err != nil {
			return nil, err
		}
	}
	var resp *pb.RangeResponse
	err := s.authorizeRead(ctx,
		func(ai *auth.AuthInfo) error { return s.auth.IsRangePermitted(ai, r.Key, r.RangeEnd) },
		func() (err error) { resp, err = s.kv.Range(r); return err })
	s.metrics.observeRange(s.log, err, time.Since(start))
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// RangeStream serves a read as etcd 3.7's RangeStream: the same checks
// as Range (a linearizable read first unless serializable, the caller's
// permission on the range), then the store's chunks, each passed to send
// (see kvstore.Store.RangeStream). chunkBytes is the chunk target.
// It is not timed as a range: its length is the client's reading pace.
func (s *Server) RangeStream(ctx context.Context, r *pb.RangeRequest, chunkBytes int, send func(*pb.RangeResponse) error) error {
	if !r.Serializable {
		if err := s.LinearizableRead(ctx); err != nil {
			return err
		}
	}
	return s.authorizeRead(ctx,
		func(ai *auth.AuthInfo) error { return s.auth.IsRangePermitted(ai, r.Key, r.RangeEnd) },
		func() error { return s.kv.RangeStream(ctx, r, chunkBytes, send) })
}

// Put writes a key through Raft.
func (s *Server) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if err := s.checkQuota(ctx, r); err != nil {
		return nil, err
	}
	res, err := s.propose(ctx, &pb.InternalRaftRequest{Put: r})
	if err != nil {
		return nil, err
	}
	return res.Resp.(*pb.PutResponse), nil
}

// DeleteRange deletes keys through Raft.
func (s *Server) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	res, err := s.propose(ctx, &pb.InternalRaftRequest{DeleteRange: r})
	if err != nil {
		return nil, err
	}
	return res.Resp.(*pb.DeleteRangeResponse), nil
}

// Txn runs a transaction. One without writes in any branch is served
// locally like a read (it does not go through Raft and does not bump the
// revision), as etcd does.
func (s *Server) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if kvstore.IsTxnReadOnly(r) {
		if !kvstore.IsTxnSerializable(r) {
			if err := s.LinearizableRead(ctx); err != nil {
				return nil, err
			}
		}
		var resp *pb.TxnResponse
		err := s.authorizeRead(ctx,
			func(ai *auth.AuthInfo) error { return s.auth.CheckTxn(ai, s.LeaseKeys, r) },
			func() (err error) { resp, err = s.kv.ReadTxn(r); return err })
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
	if err := s.checkQuota(ctx, r); err != nil {
		return nil, err
	}
	res, err := s.propose(ctx, &pb.InternalRaftRequest{Txn: r})
	if err != nil {
		return nil, err
	}
	return res.Resp.(*pb.TxnResponse), nil
}

// Compact compacts the key history through Raft. It is logical once
// applied; the old revisions are deleted in batches after it, and a
// `physical` request is answered once this member has deleted them.
func (s *Server) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	res, err := s.propose(ctx, &pb.InternalRaftRequest{Compaction: r})
	if err != nil {
		return nil, err
	}
	if r.Physical {
		// As etcd: answer once this member has deleted the old revisions
		// too (they go in batches after the compaction is applied).
		if err := s.compacted.Wait(ctx, uint64(r.Revision)); err != nil {
			return nil, err
		}
	}
	resp := res.Resp.(*pb.CompactionResponse)
	if resp.Header == nil {
		resp.Header = &pb.ResponseHeader{}
	}
	resp.Header.Revision = s.kv.Rev()
	return resp, nil
}

// HashKV hashes the key history up to rev on this member.
func (s *Server) HashKV(rev int64) (kvstore.HashKVResult, error) { return s.kv.HashKV(rev) }

// Hash hashes the whole backend of this member.
func (s *Server) Hash() (uint32, error) { return s.kv.Hash() }

// LinearizableRead returns once this member has applied every write that
// was committed when it was called. A read round not answered within the
// request timeout ends with ErrTimeout for all its callers (the raft
// node's ReadTimeout, one timer per round rather than one per read), as
// etcd's read loop ends a round.
func (s *Server) LinearizableRead(ctx context.Context) error {
	err := s.node.LinearizableRead(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftnode.ErrStopped):
		return ErrStopped
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, raftnode.ErrReadTimeout), errors.Is(err, context.DeadlineExceeded):
		// With or without a leader: etcd's read loop gives up on a round
		// with ErrTimeout.
		return ErrTimeout
	}
	return err
}

// readIndex returns once a ReadIndex round confirmed this member's
// leadership (when it leads) and it applied what was committed (for
// leaseProposer).
func (s *Server) readIndex(ctx context.Context) error { return s.node.LinearizableRead(ctx) }

// propose sends one request through Raft and waits for its applied result.
func (s *Server) propose(ctx context.Context, req *pb.InternalRaftRequest) (statemachine.Result, error) {
	commit, applied := s.node.Indexes()
	// The second test bounds the log in bytes where etcd counts entries:
	// snapshots that cannot keep up with large writes would otherwise
	// let the in-memory log grow without bound.
	if commit > applied+maxApplyLag || s.node.Overloaded() {
		return statemachine.Result{}, ErrTooManyRequests
	}
	id := s.reqIDs.Next()
	req.Header = &pb.RequestHeader{ID: id}
	if err := s.stampAuth(ctx, req); err != nil { // auth.go
		return statemachine.Result{}, err
	}
	data, err := req.Marshal()
	if err != nil {
		return statemachine.Result{}, err
	}
	if len(data) > int(s.cfg.MaxRequestBytes) {
		return statemachine.Result{}, ErrRequestTooLarge
	}

	// The wait ends at the deadline without a timer of its own: the wait
	// registry's expiry loop answers it (package wait), as it answers every
	// wait with ErrStopped when the member stops or its raft node fails.
	start := time.Now()
	deadline := start.Add(s.reqTimeout)
	ch := s.wait.RegisterUntil(id, deadline)
	s.metrics.proposalsPending.Inc()
	defer s.metrics.proposalsPending.Dec()
	if err := s.node.ProposeUntil(ctx, deadline, data); err != nil {
		s.wait.Cancel(id)
		if ctx.Err() == nil && errors.Is(err, raftnode.ErrProposalUnconfirmed) && errors.Is(err, context.DeadlineExceeded) {
			// No leader until the deadline: etcd's raft node returns
			// the proposal context's error then.
			return statemachine.Result{}, context.DeadlineExceeded
		}
		return statemachine.Result{}, s.proposeError(ctx, ctx, err, start)
	}
	select {
	case res := <-ch:
		if res.Err == wait.ErrExpired {
			s.node.CountFailedProposal()
			return statemachine.Result{}, s.proposeError(ctx, ctx, context.DeadlineExceeded, start)
		}
		return res, res.Err
	case <-ctx.Done():
		s.wait.Cancel(id)
		s.node.CountFailedProposal()
		return statemachine.Result{}, s.proposeError(ctx, ctx, ctx.Err(), start)
	}
}
