package lease

import "time"

// Clock is the leader's clock as the lessor sees it. It is injected so
// tests drive expiry with a fake clock instead of sleeping, and so the
// fault-injection build can step its time of day (internal/faults/clockfault).
// The lessor only subtracts its readings (see the timing bound in the
// package doc): a Clock's readings must carry a monotonic reading, as
// time.Now's do, for a step of the time of day to move no expiry.
type Clock interface {
	Now() time.Time
	// NewTimerAt returns a timer that fires once, when the clock reads at
	// (at once if it already does). The deadline is absolute so that a
	// caller that computed it from an earlier reading is not pushed back
	// by the time that passed since: the expiry loop's window boundaries
	// stay where its rate limit put them.
	NewTimerAt(at time.Time) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// systemClock is the real clock. time.Now carries a monotonic reading, and
// the lessor only ever subtracts times taken from it, so expiries are immune
// to wall-clock steps.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimerAt(at time.Time) Timer {
	return systemTimer{time.NewTimer(time.Until(at))}
}

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
