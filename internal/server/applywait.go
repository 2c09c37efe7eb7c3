package server

import (
	"context"
	"sync"
	"sync/atomic"
)

// appliedIndex tells waiters when the member has applied a raft index
// (etcd's applyWait): a simple token names the index of the entry that
// issued it, and a member that has not applied that entry yet waits for
// it before deciding the token is unknown.
//
// Lock order: mu is a leaf lock.
type appliedIndex struct {
	index atomic.Uint64
	mu    sync.Mutex
	ch    chan struct{} // closed at the next advance; nil without waiters
}

// advance records that everything up to i is applied (apply goroutine).
func (a *appliedIndex) advance(i uint64) {
	a.index.Store(i)
	a.mu.Lock()
	if a.ch != nil {
		close(a.ch)
		a.ch = nil
	}
	a.mu.Unlock()
}

// wait returns once index i is applied, or with ctx's error.
func (a *appliedIndex) wait(ctx context.Context, i uint64) error {
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
