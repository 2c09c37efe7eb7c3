package server

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/kvstore/compactor"
)

// newAutoCompactor builds the auto-compaction loop of
// --auto-compaction-mode/--auto-compaction-retention (nil when the
// retention is 0). It proposes compactions through Raft like `etcdctl
// compact`, and only while this member leads (leaderChanged).
func (s *Server) newAutoCompactor() (*compactor.Compactor, error) {
	if s.cfg.AutoCompactionRetention == 0 {
		return nil, nil
	}
	c, err := compactor.New(compactor.Config{
		Mode:        s.cfg.AutoCompactionMode,
		Retention:   s.cfg.AutoCompactionRetention,
		Rev:         s.kv.Rev,
		Compact:     raftCompactor{s},
		IsCompacted: func(err error) bool { return errors.Is(err, kvstore.ErrCompacted) },
		Logger:      s.log.With("component", "compactor"),
	})
	if err != nil {
		return nil, fmt.Errorf("server: auto-compaction: %w", err)
	}
	return c, nil
}

// raftCompactor compacts as `etcdctl compact` does, through the member's
// own Compact. It holds the Server, the one way back from a part built
// before raft: the compactor must exist when raft reports its first
// leader (leaderChanged), yet compacts through raft. Only the
// compactor's loop calls it, which runs from startServing, once raft
// runs.
type raftCompactor struct{ s *Server }

func (c raftCompactor) Compact(ctx context.Context, rev int64) error {
	_, err := c.s.Compact(ctx, &pb.CompactionRequest{Revision: rev})
	return err
}

// leaderChanged follows raft's leader (raftnode's OnLeaderChange, on the
// raft loop): keep-alives on their way to a member that no longer leads
// are sent again to the new one, the lessor promotes or demotes itself,
// and the auto-compactor runs only on the leader, as etcd's
// updateLeadership. The batcher learns first, so a keep-alive that sees
// the new leader in memberLeases is never refused as stale by it.
func (s *Server) leaderChanged(leader, term uint64) {
	s.renewals.Retarget(leader)
	s.leases.leaderChanged(leader, term)
	if s.compactor == nil {
		return
	}
	if leader == s.id {
		s.compactor.Resume()
	} else {
		s.compactor.Pause()
	}
}
