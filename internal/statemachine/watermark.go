package statemachine

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// Watermark tells waiters when a value the apply goroutine advances has
// reached theirs. The member keeps two: the applied raft index (etcd's
// applyWait: a simple token names the index of the entry that issued it,
// and a member that has not applied that entry yet waits for it before
// deciding the token is unknown), and the last compaction whose old
// revisions are all deleted, which a physical compaction request waits
// for.
//
// Lock order: mu is a leaf lock.
type Watermark struct {
	index atomic.Uint64
	mu    sync.Mutex
	ch    chan struct{} // closed at the next advance; nil without waiters
}

// Advance records that the value reached i (apply goroutine).
func (w *Watermark) Advance(i uint64) {
	w.index.Store(i)
	w.mu.Lock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
	w.mu.Unlock()
}

// Index is the value as last advanced.
func (w *Watermark) Index() uint64 { return w.index.Load() }

// Wait returns once the value reached i, or with ctx's error.
func (w *Watermark) Wait(ctx context.Context, i uint64) error {
	for w.index.Load() < i {
		w.mu.Lock()
		if w.ch == nil {
			w.ch = make(chan struct{})
		}
		ch := w.ch
		w.mu.Unlock()
		if w.index.Load() >= i {
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

// NoteCompaction advances compacted to how far kv's compactions have
// finished (after a Commit, and once when the store opens).
func NoteCompaction(kv *kvstore.Store, compacted *Watermark) {
	if done := kv.FinishedCompactRev(); done > 0 && uint64(done) > compacted.Index() {
		compacted.Advance(uint64(done))
	}
}
