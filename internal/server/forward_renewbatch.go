package server

import (
	"context"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/forward"
	"github.com/metastore-io/metastore/internal/lease"
)

// serveLeaseRenewBatch is the leader's side of a forwarded batch: one
// ReadIndex round proves this member leads and has applied every grant
// and revoke committed before; then each lease is renewed on its clock.
// The renewals run side by side: a keep-alive of an expired lease waits
// for its revocation and must not hold up the rest of the batch.
func (s *Server) serveLeaseRenewBatch(ctx context.Context, data []byte) ([]byte, error) {
	ids, err := forward.DecodeRenewBatch(data)
	if err != nil {
		return forward.EncodeReply(nil, fmt.Errorf("server: decode forwarded keep-alives: %w", err)), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.reqTimeout)
	defer cancel()
	replies := make([][]byte, len(ids))
	if s.node.Leader() != s.id || s.node.LinearizableRead(ctx) != nil {
		notPrimary := forward.EncodeReply(nil, lease.ErrNotPrimary)
		for i := range replies {
			replies[i] = notPrimary
		}
		return forward.EncodeReply(forward.AppendDelimited(nil, replies), nil), nil
	}
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ttl, err := s.leases.lessor.Renew(ctx, id)
			replies[i] = forward.EncodeMessageReply(&pb.LeaseKeepAliveResponse{ID: id, TTL: ttl}, err)
		}()
	}
	wg.Wait()
	return forward.EncodeReply(forward.AppendDelimited(nil, replies), nil), nil
}
