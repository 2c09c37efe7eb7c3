//go:build faultinject

package clockfault

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/metastore-io/metastore/internal/lease"
)

// EnvVar names the fault specification (see the package doc).
const EnvVar = "METASTORE_CLOCKFAULT"

// rereadInterval is how stale the step may be.
const rereadInterval = 50 * time.Millisecond

// LeaseClock is the clock the lessor reads: nil (the system clock) unless
// EnvVar names a step file. A malformed specification stops the process,
// as a test asked for a fault it will not get.
func LeaseClock() lease.Clock {
	spec := os.Getenv(EnvVar)
	if spec == "" {
		return nil
	}
	path, ok := strings.CutPrefix(spec, "file=")
	if !ok || path == "" {
		fmt.Fprintf(os.Stderr, "clockfault: %s=%q: want file=PATH\n", EnvVar, spec)
		os.Exit(2)
	}
	if err := checkLayout(); err != nil {
		fmt.Fprintln(os.Stderr, "clockfault:", err)
		os.Exit(2)
	}
	return &steppedClock{path: path}
}

// steppedClock is the system clock with its time of day stepped by the
// duration in path.
type steppedClock struct {
	path string

	mu     sync.Mutex // guards the fields below
	step   time.Duration
	readAt time.Time // when path was last read (a monotonic reading)
}

func (c *steppedClock) Now() time.Time {
	now := time.Now()
	return stepWall(now, c.currentStep(now))
}

// currentStep rereads the step file when the last read is older than
// rereadInterval; a file that cannot be read or parsed keeps the step.
func (c *steppedClock) currentStep(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.readAt.IsZero() && now.Sub(c.readAt) < rereadInterval {
		return c.step
	}
	c.readAt = now
	data, err := os.ReadFile(c.path)
	if err != nil && !os.IsNotExist(err) {
		return c.step
	}
	step := time.Duration(0)
	if s := strings.TrimPrefix(strings.TrimSpace(string(data)), "+"); s != "" {
		if step, err = time.ParseDuration(s); err != nil {
			return c.step
		}
	}
	if step != c.step {
		c.step = step
		fmt.Fprintf(os.Stderr, "clockfault: the clock is now stepped by %s\n", durationString(step))
	}
	return c.step
}

// durationString writes a step with its sign ("+5m0s", "-5m0s").
func durationString(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

// Timers measure durations, which a step of the time of day does not
// change: at carries the monotonic reading of the Now it came from, and
// time.Until subtracts monotonic readings when both have one.
func (c *steppedClock) NewTimerAt(at time.Time) lease.Timer {
	return timer{time.NewTimer(time.Until(at))}
}

type timer struct{ t *time.Timer }

func (t timer) C() <-chan time.Time { return t.t.C }
func (t timer) Stop() bool          { return t.t.Stop() }

// timeLayout mirrors time.Time's fields: the wall clock (with the
// hasMonotonic flag), the monotonic reading when that flag is set, and
// the location. The time package offers no way to move one reading
// without the other; checkLayout verifies the mirror before it is used.
type timeLayout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const hasMonotonic = 1 << 63

// stepWall moves t's time of day by step and keeps its monotonic reading.
func stepWall(t time.Time, step time.Duration) time.Time {
	if step == 0 {
		return t
	}
	stepped := t.Add(step) // moves both readings
	orig := (*timeLayout)(unsafe.Pointer(&t))
	moved := (*timeLayout)(unsafe.Pointer(&stepped))
	if orig.wall&hasMonotonic != 0 && moved.wall&hasMonotonic != 0 {
		moved.ext = orig.ext // put the monotonic reading back
	}
	return stepped
}

// checkLayout verifies on this Go's time.Time that stepWall moves the
// time of day and nothing else.
func checkLayout() error {
	if unsafe.Sizeof(time.Time{}) != unsafe.Sizeof(timeLayout{}) {
		return fmt.Errorf("time.Time is %d bytes, the mirror %d", unsafe.Sizeof(time.Time{}), unsafe.Sizeof(timeLayout{}))
	}
	now := time.Now()
	stepped := stepWall(now, -time.Hour)
	if d := stepped.Sub(now); d != 0 {
		return fmt.Errorf("a stepped reading is %v from its original on the monotonic clock, want 0", d)
	}
	if d := stepped.Round(0).Sub(now.Round(0)); d != -time.Hour {
		return fmt.Errorf("a reading stepped by -1h is %v from its original on the wall clock", d)
	}
	return nil
}
