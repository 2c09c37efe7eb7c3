package statemachine

import "sync"

// Notices carries what apply finds the member must do through raft:
// raise this member's NOSPACE alarm before answering the requests that
// exceeded the quota, or, leading a new term, record the cluster version.
// Apply can do neither itself (a proposal waits for its own apply) and
// never waits for them: it posts a notice, and the member's notice loop
// takes it (Wake, Take) and acts on it once raft runs. The state machine
// is built before raft, which it serves, so it holds this queue and
// nothing that proposes.
//
// Lock order: mu is a leaf lock.
type Notices struct {
	mu      sync.Mutex
	pending []Notice
	wake    chan struct{} // holds a token while notices are pending
}

// NoticeKind says what a notice asks of the member.
type NoticeKind uint8

const (
	// NoticeNoSpace: raise this member's NOSPACE alarm, then answer Held.
	NoticeNoSpace NoticeKind = iota
	// NoticeClusterVersion: record the cluster version while leading in
	// Term.
	NoticeClusterVersion
)

// Notice is one thing apply left for the member to do.
type Notice struct {
	Kind NoticeKind
	Held []Pending // NoticeNoSpace: the answers to give once the alarm is raised
	Term uint64    // NoticeClusterVersion
}

// NewNotices returns an empty queue.
func NewNotices() *Notices {
	return &Notices{wake: make(chan struct{}, 1)}
}

// post queues n without blocking (apply goroutine).
func (q *Notices) post(n Notice) {
	q.mu.Lock()
	q.pending = append(q.pending, n)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Wake holds a token while notices are pending: the notice loop selects
// on it, then calls Take.
func (q *Notices) Wake() <-chan struct{} { return q.wake }

// Take removes and returns the pending notices, oldest first.
func (q *Notices) Take() []Notice {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.pending
	q.pending = nil
	return out
}
