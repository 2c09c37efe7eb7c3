package coordination

import (
	"sync"
	"time"
)

// API is the lock API a contender uses. The two keep their queues under
// different prefixes, so "http/r0" and "sdk/r0" are different locks.
type API string

const (
	// APIHTTP is the HTTP lock service through pkg/lockclient.
	APIHTTP API = "http"
	// APISDK is the SDK's fenced lock, pkg/concurrency/lock.
	APISDK API = "sdk"
)

// Operations of a Call.
const (
	OpLock   = "lock"
	OpUnlock = "unlock"
)

// How a Hold ended.
const (
	EndUnlock = "unlock" // the holder sent its unlock
	EndLost   = "lost"   // Lost() fired first
	// EndStopped: a raw holder stopped reading its stream; it cannot be
	// told it lost the lock, so its belief is taken to end there (a
	// write it makes later is the fenced resource's to refuse).
	EndStopped = "stopped reading"
	// EndKilled: a fault killed the holder's process before it was told
	// it lost the lock.
	EndKilled = "killed"
)

// Call is one lock or unlock call of a contender, timed on the test
// process's clock.
type Call struct {
	ID       int
	Resource string // API + "/" + name: one lock
	Client   string
	API      API
	Op       string
	Start    time.Time
	// Answers are the signs of life the call got before it returned:
	// for an HTTP /lock stream every read of its body (the queued event
	// and the heartbeat lines the service writes every second).
	Answers []time.Time
	// Queued is when the HTTP service said the call waits in line; zero
	// if it never did (or for the SDK, which does not say).
	Queued time.Time
	// End is when the call returned; zero while it has not.
	End     time.Time
	Granted bool // a lock call that returned the lock
	Err     string
}

// Hold is one holder's belief that it holds a lock: from the moment its
// lock call returned the lock to the first of its unlock being sent and
// Lost() firing. The token is its fencing token.
type Hold struct {
	Resource string
	Client   string
	Call     int // ID of the lock call that granted it
	Token    int64
	Planned  time.Duration // how long the holder means to hold
	Asked    time.Time     // when its lock call was sent
	Granted  time.Time
	End      time.Time // zero while still believed
	EndCause string
	Why      string // for EndLost: the lock's Err()
}

// LeaseProbe is one plain lease kept alive through a follower across a
// leader fault.
type LeaseProbe struct {
	Fault    string
	Member   string // the follower its keep-alives went through
	At       time.Time
	Survived bool
	Detail   string
}

// Abandon is a lock its holder's client left without a word (its host
// vanished, or it stopped reading its stream): the service must find out
// and grant the lock to the next waiter within Bound of At.
type Abandon struct {
	Resource string
	Client   string
	How      string // the fault's name
	At       time.Time
	Bound    time.Duration
}

// LateWrite is a write a holder whose belief ended made to the protected
// resource with its token after the lock was granted to the next holder:
// the fenced store must refuse it.
type LateWrite struct {
	Resource string
	Client   string
	Token    int64
	At       time.Time
	Accepted bool
}

// KeyLife is one contender's key in an SDK lock's queue, as an observer
// following the queues saw it come and go: while it exists, the
// contender waits in line (or holds).
type KeyLife struct {
	Resource string
	Owner    string // the contender (the key's value, lock.WithOwner)
	Key      string
	Created  time.Time
	Deleted  time.Time // zero while it exists
}

// History is what the workload and the faults record during a run. The
// protected resources live here too: each lock's fenced store remembers
// the highest token written and refuses a smaller one. Its methods are
// safe for concurrent use.
type History struct {
	mu       sync.Mutex
	calls    []*Call
	holds    []*Hold
	probes   []LeaseProbe
	abandons []Abandon
	late     []LateWrite
	keys     []*KeyLife
	keyIndex map[string]int   // key -> index in keys
	highest  map[string]int64 // resource -> highest token the store accepted
	writes   int
	refusals int
	clock    func() time.Time
}

// NewHistory returns an empty history on the process's clock.
func NewHistory() *History { return newHistoryAt(time.Now) }

func newHistoryAt(clock func() time.Time) *History {
	return &History{highest: map[string]int64{}, keyIndex: map[string]int{}, clock: clock}
}

// StartCall records that a call is being sent now.
func (h *History) StartCall(resource, client string, api API, op string) *Call {
	return h.StartCallAt(resource, client, api, op, time.Time{})
}

// StartCallAt records that a call was sent at at (zero: now). The ...At
// methods record what a child process reported with its own time stamps:
// a process in a network namespace reads the same clock.
func (h *History) StartCallAt(resource, client string, api API, op string, at time.Time) *Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := &Call{ID: len(h.calls), Resource: resource, Client: client, API: api, Op: op, Start: h.stamp(at)}
	h.calls = append(h.calls, c)
	return c
}

// stamp is at, or the clock's now when at is zero; h.mu is held.
func (h *History) stamp(at time.Time) time.Time {
	if at.IsZero() {
		return h.clock()
	}
	return at
}

// Answer records a sign of life of a call still waiting.
func (h *History) Answer(c *Call) { h.AnswerAt(c, time.Time{}) }

// AnswerAt records a sign of life at at (zero: now).
func (h *History) AnswerAt(c *Call, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.End.IsZero() {
		c.Answers = append(c.Answers, h.stamp(at))
	}
}

// Queued records the HTTP service's queued event.
func (h *History) Queued(c *Call) { h.QueuedAt(c, time.Time{}) }

// QueuedAt records the queued event at at (zero: now).
func (h *History) QueuedAt(c *Call, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.End.IsZero() {
		now := h.stamp(at)
		c.Queued = now
		c.Answers = append(c.Answers, now)
	}
}

// EndCall records that the call returned with err (nil: success).
func (h *History) EndCall(c *Call, err error) { h.EndCallAt(c, err, time.Time{}) }

// EndCallAt records that the call returned at at (zero: now).
func (h *History) EndCallAt(c *Call, err error, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.End = h.stamp(at)
	if err != nil {
		c.Err = err.Error()
	}
}

// Grant records that lock call c returned the lock with token, to be
// held for planned: the belief starts now, and the holder's first act is
// a write to the protected resource with its token.
func (h *History) Grant(c *Call, token int64, planned time.Duration) *Hold {
	return h.GrantAt(c, token, planned, time.Time{})
}

// GrantAt records a grant at at (zero: now).
func (h *History) GrantAt(c *Call, token int64, planned time.Duration, at time.Time) *Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.stamp(at)
	c.End, c.Granted = now, true
	hold := &Hold{Resource: c.Resource, Client: c.Client, Call: c.ID, Token: token, Planned: planned, Asked: c.Start, Granted: now}
	h.holds = append(h.holds, hold)
	h.writeLocked(c.Resource, token)
	return hold
}

// Write is a holder's write to the protected resource, fenced by its
// token. It reports whether the resource accepted it.
func (h *History) Write(hold *Hold) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writeLocked(hold.Resource, hold.Token)
}

// writeLocked is the fenced store: a token below the highest one it
// accepted is refused, as a real fenced store would refuse it.
func (h *History) writeLocked(resource string, token int64) bool {
	h.writes++
	if token < h.highest[resource] {
		h.refusals++
		return false
	}
	h.highest[resource] = token
	return true
}

// EndHold ends the holder's belief now, for cause (why says more),
// unless it already ended (the first of unlock and Lost() counts).
func (h *History) EndHold(hold *Hold, cause, why string) { h.EndHoldAt(hold, cause, why, time.Time{}) }

// EndHoldAt ends the belief at at (zero: now), unless it already ended.
func (h *History) EndHoldAt(hold *Hold, cause, why string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hold.End.IsZero() {
		hold.End, hold.EndCause, hold.Why = h.stamp(at), cause, why
	}
}

// holding returns the beliefs not ended yet.
func (h *History) holding() []Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Hold
	for _, hold := range h.holds {
		if hold.End.IsZero() {
			out = append(out, *hold)
		}
	}
	return out
}

// nextGrant returns the first belief of resource granted after after to
// a client other than client, if there is one yet.
func (h *History) nextGrant(resource, client string, after time.Time) (Hold, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var next *Hold
	for _, hold := range h.holds {
		if hold.Resource == resource && hold.Client != client && hold.Granted.After(after) && (next == nil || hold.Granted.Before(next.Granted)) {
			next = hold
		}
	}
	if next == nil {
		return Hold{}, false
	}
	return *next, true
}

// AddProbe records a lease probe.
func (h *History) AddProbe(p LeaseProbe) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probes = append(h.probes, p)
}

// Abandoned records that hold's client left it without a word at at,
// to be granted to the next waiter within bound.
func (h *History) Abandoned(hold *Hold, how string, at time.Time, bound time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.abandons = append(h.abandons, Abandon{Resource: hold.Resource, Client: hold.Client, How: how, At: at, Bound: bound})
}

// LateWrite is hold's write to the protected resource, with its token,
// after its belief ended and the lock went to another holder. It reports
// whether the fenced store accepted it (it must not).
func (h *History) LateWrite(hold *Hold) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := h.writeLocked(hold.Resource, hold.Token)
	h.late = append(h.late, LateWrite{Resource: hold.Resource, Client: hold.Client, Token: hold.Token, At: h.clock(), Accepted: ok})
	return ok
}

// KeyCreated records that an observer saw owner's key join a queue,
// unless another one saw it first. (The SDK's keys name their lease, so
// a key is never created twice.)
func (h *History) KeyCreated(resource, owner, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, seen := h.keyIndex[key]; seen {
		return
	}
	h.keyIndex[key] = len(h.keys)
	h.keys = append(h.keys, &KeyLife{Resource: resource, Owner: owner, Key: key, Created: h.clock()})
}

// KeyDeleted records that an observer saw key leave its queue, unless
// another one saw it first.
func (h *History) KeyDeleted(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i, seen := h.keyIndex[key]; seen && h.keys[i].Deleted.IsZero() {
		h.keys[i].Deleted = h.clock()
	}
}

// Snapshot is a copy of a history for the checker, taken at At: what is
// still open then (a call without answer, a belief not ended) counts as
// open until At.
type Snapshot struct {
	At       time.Time
	Calls    []Call
	Holds    []Hold
	Probes   []LeaseProbe
	Abandons []Abandon
	Late     []LateWrite
	Keys     []KeyLife
	Writes   int
	Refusals int
}

// Snapshot copies the history now.
func (h *History) Snapshot() Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Snapshot{At: h.clock(), Probes: append([]LeaseProbe(nil), h.probes...),
		Abandons: append([]Abandon(nil), h.abandons...), Late: append([]LateWrite(nil), h.late...), Writes: h.writes, Refusals: h.refusals}
	for _, c := range h.calls {
		cc := *c
		cc.Answers = append([]time.Time(nil), c.Answers...)
		s.Calls = append(s.Calls, cc)
	}
	for _, hold := range h.holds {
		s.Holds = append(s.Holds, *hold)
	}
	for _, k := range h.keys {
		s.Keys = append(s.Keys, *k)
	}
	return s
}
