package lease

import "time"

// Clock is the leader's wall clock as the lessor sees it. It is injected so
// tests drive expiry with a fake clock instead of sleeping.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now (at once if d
	// is not positive).
	NewTimer(d time.Duration) Timer
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

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
