package server

import (
	"context"
	"sync"
	"sync/atomic"
)

// watermark tells waiters when a value the apply goroutine advances has
// reached theirs. Server.applied is the applied raft index (etcd's
// applyWait): a simple token names the index of the entry that issued
// it, and a member that has not applied that entry yet waits for it
// before deciding the token is unknown. Server.compacted is the last
// compaction whose old revisions are all deleted, which a physical
// compaction request waits for.
//
// Lock order: mu is a leaf lock.
type watermark struct {
	index atomic.Uint64
	mu    sync.Mutex
	ch    chan struct{} // closed at the next advance; nil without waiters
}

// advance records that the value reached i (apply goroutine).
func (a *watermark) advance(i uint64) {
	a.index.Store(i)
	a.mu.Lock()
	if a.ch != nil {
		close(a.ch)
		a.ch = nil
	}
	a.mu.Unlock()
}

// wait returns once the value reached i, or with ctx's error.
func (a *watermark) wait(ctx context.Context, i uint64) error {
	for a.index.Load() < i {
		a.mu.Lock()
		if a.ch == nil {
			a.ch = make(chan struct{})
		}
		ch := a.ch
		a.mu.Unlock()
		if a.index.Load() >= i {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
