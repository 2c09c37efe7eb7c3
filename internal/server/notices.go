package server

import "sync"

// applyNotices carries what apply finds the member must do through raft:
// raise this member's NOSPACE alarm before answering the requests that
// exceeded the quota (quota.go), or, leading a new term, record the
// cluster version (clusterversion.go). Apply can do neither itself (a
// proposal waits for its own apply) and never waits for them: it posts a
// notice, and the member's notice loop acts on it. The applier is built
// before raft, which it serves, so it holds this queue and nothing that
// proposes; the loop starts once raft runs (startServing).
//
// Lock order: mu is a leaf lock.
type applyNotices struct {
	mu      sync.Mutex
	pending []applyNotice
	wake    chan struct{} // holds a token while notices are pending
}

type noticeKind uint8

const (
	// noticeNoSpace: raise this member's NOSPACE alarm, then answer held.
	noticeNoSpace noticeKind = iota
	// noticeClusterVersion: record the cluster version while leading in term.
	noticeClusterVersion
)

// applyNotice is one thing apply left for the member to do.
type applyNotice struct {
	kind noticeKind
	held []pendingResult // noticeNoSpace
	term uint64          // noticeClusterVersion
}

func newApplyNotices() *applyNotices {
	return &applyNotices{wake: make(chan struct{}, 1)}
}

// post queues n without blocking (apply goroutine).
func (q *applyNotices) post(n applyNotice) {
	q.mu.Lock()
	q.pending = append(q.pending, n)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take removes and returns the pending notices.
func (q *applyNotices) take() []applyNotice {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.pending
	q.pending = nil
	return out
}

// actOnApplyNotices runs from startServing until the member stops. Each
// notice runs in a goroutine of its own (it proposes and waits for its
// apply). Notices left when the member stops are dropped: their
// proposers are answered ErrStopped by propose, which waits on stopping
// too.
func (s *Server) actOnApplyNotices() {
	defer s.serving.Done()
	for {
		select {
		case <-s.stopping:
			return
		case <-s.notices.wake:
		}
		for _, n := range s.notices.take() {
			s.actOn(n)
		}
	}
}

func (s *Server) actOn(n applyNotice) {
	switch n.kind {
	case noticeNoSpace:
		if s.spawn(func() { s.raiseNoSpaceThenAnswer(n.held) }) != nil {
			for _, r := range n.held {
				s.wait.Trigger(r.id, applyResult{err: ErrStopped})
			}
		}
	case noticeClusterVersion:
		// ErrStopped means the member is stopping and nothing is left
		// to do.
		_ = s.spawn(func() { s.setClusterVersion(n.term) })
	}
}
