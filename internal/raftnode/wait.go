package raftnode

import "sync"

// broadcast wakes every goroutine waiting for the next occurrence of an
// event (here: a leader change). Waiters take the current channel, then
// check their condition, then wait on it, so no occurrence is missed.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// next returns a channel closed at the next notify.
func (b *broadcast) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// appliedWaiters releases ReadIndex rounds once the state machine has
// applied their confirmed index. Rounds are few (one per ReadIndex
// round-trip, not per read), so a slice scanned on each advance is enough.
type appliedWaiters struct {
	mu      sync.Mutex
	applied uint64
	waiting []*readRound
}

// wait finishes r once the applied index reaches r.index.
func (a *appliedWaiters) wait(r *readRound) {
	a.mu.Lock()
	if a.applied >= r.index {
		a.mu.Unlock()
		r.finish(nil)
		return
	}
	a.waiting = append(a.waiting, r)
	a.mu.Unlock()
}

// advance records a new applied index and finishes the rounds it satisfies.
func (a *appliedWaiters) advance(applied uint64) {
	a.mu.Lock()
	a.applied = applied
	if len(a.waiting) == 0 {
		a.mu.Unlock()
		return
	}
	var ready []*readRound
	kept := a.waiting[:0]
	for _, r := range a.waiting {
		if r.index <= applied {
			ready = append(ready, r)
		} else {
			kept = append(kept, r)
		}
	}
	clear(a.waiting[len(kept):])
	a.waiting = kept
	a.mu.Unlock()
	for _, r := range ready {
		r.finish(nil)
	}
}

// pending is the number of rounds waiting for the applied index.
func (a *appliedWaiters) pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiting)
}
