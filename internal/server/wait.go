package server

import "sync"

// waitShards spreads registrations over several mutexes so that many
// concurrent proposers do not serialise on one lock.
const waitShards = 64

// waitRegistry matches applied proposals to the callers waiting for them,
// by the proposal's request ID. Register before proposing; the apply loop
// calls Trigger once the entry is applied; a caller that gives up calls
// Cancel so its slot is not leaked.
type waitRegistry struct {
	shards [waitShards]waitShard
}

type waitShard struct {
	mu sync.Mutex
	m  map[uint64]chan applyResult
}

func newWaitRegistry() *waitRegistry {
	w := &waitRegistry{}
	for i := range w.shards {
		w.shards[i].m = map[uint64]chan applyResult{}
	}
	return w
}

// Register returns the channel on which the result for id arrives. The
// channel is buffered so that Trigger never blocks the apply loop.
func (w *waitRegistry) Register(id uint64) <-chan applyResult {
	ch := make(chan applyResult, 1)
	s := &w.shards[id%waitShards]
	s.mu.Lock()
	s.m[id] = ch
	s.mu.Unlock()
	return ch
}

// Trigger delivers the result for id if someone waits for it.
func (w *waitRegistry) Trigger(id uint64, r applyResult) {
	s := &w.shards[id%waitShards]
	s.mu.Lock()
	ch, ok := s.m[id]
	delete(s.m, id)
	s.mu.Unlock()
	if ok {
		ch <- r
	}
}

// Cancel forgets id; a later Trigger for it is a no-op.
func (w *waitRegistry) Cancel(id uint64) {
	s := &w.shards[id%waitShards]
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}
