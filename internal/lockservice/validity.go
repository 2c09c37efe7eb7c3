package lockservice

import (
	"sync"
	"time"
)

// driftRate is ρ, the most two machines' clock rates may differ by (see
// docs/coordination-safety.md): a TTL of L on the leader's clock is at
// least L·(1−ρ) of real time, and L·(1−2ρ) on ours leaves a margin for
// both clocks.
const driftRate = 0.01

// validity is how long a contender may go on believing its lease, and so
// its lock or place, holds: its deadline is s + L·(1−2ρ) − D on the
// member's clock, s the send time of the last renewal the leader
// confirmed (or of the grant), L the TTL it confirmed and D the lock
// delay. The leader expires the lease no earlier than s + L·(1−ρ) of real
// time, so everybody told to stop at the deadline stops at least D before
// anybody else can be granted the lock.
//
// Once the deadline passes it stays passed: expired is closed, at the
// deadline itself (a timer, not a poll), and a confirmation that arrives
// later (of a renewal sent in time) does not revive it, because the
// holder was already told the lock is lost.
type validity struct {
	delay   time.Duration
	expired chan struct{}

	mu       sync.Mutex // guards the fields below
	deadline time.Time
	past     bool
	timer    *time.Timer
}

func newValidity(sent time.Time, ttl, delay time.Duration) *validity {
	v := &validity{delay: delay, expired: make(chan struct{}), deadline: deadlineOf(sent, ttl, delay)}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.timer = time.AfterFunc(time.Until(v.deadline), v.check)
	return v
}

// deadlineOf is the deadline a renewal sent at sent with ttl confirmed gives.
func deadlineOf(sent time.Time, ttl, delay time.Duration) time.Time {
	return sent.Add(time.Duration(float64(ttl)*(1-2*driftRate)) - delay)
}

// check runs at the deadline: it closes expired unless a confirmation
// moved the deadline meanwhile, in which case it waits for the new one.
func (v *validity) check() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.past {
		return
	}
	if left := time.Until(v.deadline); left > 0 {
		v.timer.Reset(left)
		return
	}
	v.past = true
	close(v.expired)
}

// confirm records a renewal sent at sent that the leader answered with
// ttl: it moves the deadline later, unless the deadline already passed.
func (v *validity) confirm(sent time.Time, ttl time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.past {
		return
	}
	if d := deadlineOf(sent, ttl, v.delay); d.After(v.deadline) {
		v.deadline = d
		// The timer fires at the old deadline at the latest; check
		// re-arms it for this one.
	}
}

// remaining is the time left before the deadline; zero once it passed.
func (v *validity) remaining() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.past {
		return 0
	}
	return max(time.Until(v.deadline), 0)
}

// valid reports whether the deadline has not passed yet.
func (v *validity) valid() bool { return v.remaining() > 0 }

// stop releases the timer; expired stays as it is.
func (v *validity) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.timer.Stop()
}
