package wait

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/statemachine"
)

// waitShards spreads registrations over several mutexes so that many
// concurrent proposers do not serialise on one lock.
const waitShards = 64

// expiryInterval is how often the expiry loop looks for waits past their
// deadline: a proposal that is never applied is answered "request timed
// out" between its deadline and this much later (the deadline is seconds).
const expiryInterval = 20 * time.Millisecond

// ErrExpired is the result of a wait that reached its deadline.
var ErrExpired = errors.New("server: wait expired")

// Registry matches applied proposals to the callers waiting for them,
// by the proposal's request ID. Register before proposing; the apply loop
// calls Trigger once the entry is applied; a caller that gives up calls
// Cancel so its slot is not leaked.
//
// It also ends the waits the apply loop never answers, so that a waiter
// selects on its channel and its caller's context only: a registration
// may carry a deadline, and ExpireLoop answers it with ErrExpired
// once it has passed; when the member stops or its raft node fails,
// close answers every wait, and every later registration at once, with
// ErrStopped. A per-request timer (context.WithTimeout) and a select on
// the member's stop channels showed in the profiles of a put and of a
// linearizable read at 1,000 clients (docs/performance.md, "Measurements
// behind the code").
type Registry struct {
	shards [waitShards]waitShard
	// timed counts the registrations with a deadline; kick wakes the
	// expiry loop when the first one arrives, so that an idle member's
	// loop sleeps.
	timed atomic.Int64
	kick  chan struct{}
}

// waitShard: lock order: mu is a leaf lock.
type waitShard struct {
	mu     sync.Mutex
	m      map[uint64]waitEntry
	closed error // set by close: the answer to every later registration
}

type waitEntry struct {
	ch       chan statemachine.Result
	deadline time.Time // zero: none
}

func New() *Registry {
	w := &Registry{kick: make(chan struct{}, 1)}
	for i := range w.shards {
		w.shards[i].m = map[uint64]waitEntry{}
	}
	return w
}

// Register returns the channel on which the result for id arrives. The
// channel is buffered so that Trigger never blocks the apply loop.
func (w *Registry) Register(id uint64) <-chan statemachine.Result {
	return w.register(id, time.Time{})
}

// RegisterUntil is Register with a deadline, after which the result is
// ErrExpired.
func (w *Registry) RegisterUntil(id uint64, deadline time.Time) <-chan statemachine.Result {
	return w.register(id, deadline)
}

func (w *Registry) register(id uint64, deadline time.Time) <-chan statemachine.Result {
	e := waitEntry{ch: make(chan statemachine.Result, 1), deadline: deadline}
	s := &w.shards[id%waitShards]
	s.mu.Lock()
	if s.closed != nil {
		err := s.closed
		s.mu.Unlock()
		e.ch <- statemachine.Result{Err: err}
		return e.ch
	}
	s.m[id] = e
	s.mu.Unlock()
	if !e.deadline.IsZero() && w.timed.Add(1) == 1 {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return e.ch
}

// take removes id's entry; ok is false when there is none.
func (w *Registry) take(id uint64) (waitEntry, bool) {
	s := &w.shards[id%waitShards]
	s.mu.Lock()
	e, ok := s.m[id]
	delete(s.m, id)
	s.mu.Unlock()
	if ok && !e.deadline.IsZero() {
		w.timed.Add(-1)
	}
	return e, ok
}

// Trigger delivers the result for id if someone waits for it.
func (w *Registry) Trigger(id uint64, r statemachine.Result) {
	if e, ok := w.take(id); ok {
		e.ch <- r
	}
}

// Cancel forgets id; a later Trigger for it is a no-op.
func (w *Registry) Cancel(id uint64) { w.take(id) }

// expire answers, with ErrExpired, every wait whose deadline is not
// after now.
func (w *Registry) expire(now time.Time) {
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		for id, e := range s.m {
			if !e.deadline.IsZero() && !e.deadline.After(now) {
				delete(s.m, id)
				w.timed.Add(-1)
				e.ch <- statemachine.Result{Err: ErrExpired}
			}
		}
		s.mu.Unlock()
	}
}

// close answers every wait, and every later registration, with err.
func (w *Registry) Close(err error) {
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		if s.closed == nil {
			s.closed = err
		}
		for id, e := range s.m {
			delete(s.m, id)
			if !e.deadline.IsZero() {
				w.timed.Add(-1)
			}
			e.ch <- statemachine.Result{Err: err}
		}
		s.mu.Unlock()
	}
}

// ExpireLoop expires waits every expiryInterval while some have a
// deadline, until stop closes; then it closes the registry with
// membererr.ErrStopped. The member runs it from its start to its stop, and
// stops it when the member stops or its raft node fails (nothing will be
// applied then).
func (w *Registry) ExpireLoop(stop <-chan struct{}, failed <-chan struct{}) {
	defer w.Close(membererr.ErrStopped)
	t := time.NewTimer(expiryInterval)
	defer t.Stop()
	for {
		if w.timed.Load() == 0 {
			select {
			case <-w.kick:
			case <-stop:
				return
			case <-failed:
				return
			}
		}
		t.Reset(expiryInterval)
		select {
		case <-t.C:
			w.expire(time.Now())
		case <-stop:
			return
		case <-failed:
			return
		}
	}
}
