package renewal

import "time"

// Clock is the Renewer's time source, so tests can drive it.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of time.Timer the Renewer uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// systemClock is the process's clock. time.Now carries a monotonic
// reading, so deadlines computed from it ignore wall-clock steps.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
