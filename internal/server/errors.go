package server

import (
	"context"
	"errors"
	"time"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// Errors of the server layer. Their texts are etcd's; they are defined in
// package membererr, where pkg/etcdcompat maps each to the gRPC status
// etcd returns for it.
var (
	ErrStopped          = membererr.ErrStopped
	ErrTimeout          = membererr.ErrTimeout
	ErrNoLeader         = membererr.ErrNoLeader
	ErrRequestTooLarge  = membererr.ErrRequestTooLarge
	ErrTooManyRequests  = membererr.ErrTooManyRequests
	ErrLeaderChanged    = membererr.ErrLeaderChanged
	ErrUnknownMethod    = membererr.ErrUnknownMethod
	ErrNotImplementedOp = membererr.ErrNotImplementedOp
)

// proposeError turns a failed proposal (ctx, derived from the caller's
// callerCtx, bounds it by the request timeout) into the error etcd 3.6
// returns for it (processInternalRaftRequestOnce, parseProposeCtxErr):
//
//   - the caller's own cancellation or deadline stays a context error;
//   - a proposal raft did not take before the request timeout — raft holds
//     proposals back while it knows no leader — fails with the context's
//     own error: etcd returns raft's Propose error unchanged, so a client
//     sees gRPC's DeadlineExceeded "context deadline exceeded", 5 s + 2
//     election timeouts after the request arrived, not "no leader";
//   - a proposal raft took but that was not applied in time fails with
//     ErrTimeout ("etcdserver: request timed out", gRPC Unavailable).
func (s *Server) proposeError(callerCtx, ctx context.Context, err error, start time.Time) error {
	if callerCtx.Err() != nil {
		return callerCtx.Err()
	}
	switch {
	case errors.Is(err, raftnode.ErrStopped):
		return ErrStopped
	case errors.Is(err, raftnode.ErrTooManyUncommitted):
		// The leader's proposals outrun its disk (or its quorum): the
		// part of the log's byte budget for them is full.
		return ErrTooManyRequests
	case errors.Is(err, raftnode.ErrProposalUnconfirmed) && ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		s.log.Warn("proposal timed out", "took", time.Since(start))
		return ErrTimeout
	}
	return err
}
