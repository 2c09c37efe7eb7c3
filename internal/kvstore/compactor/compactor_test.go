package compactor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a Clock the test advances by hand. blocked receives one
// value every time the loop starts waiting, so the test knows the loop
// has finished its previous step.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	blocked chan struct{}
}

type fakeWaiter struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_700_000_000, 0), blocked: make(chan struct{}, 1)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	c := make(chan time.Time, 1)
	f.waiters = append(f.waiters, fakeWaiter{at: f.now.Add(d), c: c})
	f.mu.Unlock()
	f.blocked <- struct{}{}
	return c
}

// advance moves the clock and fires every waiter that is due.
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.c <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// waitBlocked waits until the loop waits on the clock again.
func (f *fakeClock) waitBlocked(t *testing.T) {
	t.Helper()
	select {
	case <-f.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the compactor loop did not come back to its clock")
	}
}

// recorder is a Compactable that records what it was asked to compact.
type recorder struct {
	mu   sync.Mutex
	revs []int64
	fail atomic.Bool
}

var errInjected = errors.New("injected failure")

func (r *recorder) Compact(_ context.Context, rev int64) error {
	if r.fail.Load() {
		return errInjected
	}
	r.mu.Lock()
	r.revs = append(r.revs, rev)
	r.mu.Unlock()
	return nil
}

func (r *recorder) take() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.revs
	r.revs = nil
	return out
}

func startCompactor(t *testing.T, mode string, retention time.Duration, rev *atomic.Int64) (*fakeClock, *recorder, *Compactor) {
	t.Helper()
	clock, rec := newFakeClock(), &recorder{}
	c, err := New(Config{Mode: mode, Retention: retention, Rev: rev.Load, Compact: rec, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	c.Run()
	t.Cleanup(func() {
		go func() {
			for range clock.blocked {
			}
		}()
		c.Stop()
		close(clock.blocked) // the loop has exited: nothing sends any more
	})
	return clock, rec, c
}

func requireCompacted(t *testing.T, rec *recorder, want ...int64) {
	t.Helper()
	got := rec.take()
	if len(got) != len(want) {
		t.Fatalf("compacted at %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("compacted at %v, want %v", got, want)
		}
	}
}

// Revision mode: every 5 minutes, current revision - retention, skipped
// when not positive or unchanged, retried after a failure, and not at all
// while paused.
func TestRevisionMode(t *testing.T) {
	var rev atomic.Int64
	rev.Store(5)
	clock, rec, c := startCompactor(t, ModeRevision, 10, &rev)
	clock.waitBlocked(t)
	// tick advances the clock by d and waits until the loop handled it.
	tick := func(d time.Duration, want ...int64) {
		t.Helper()
		clock.advance(d)
		clock.waitBlocked(t)
		requireCompacted(t, rec, want...)
	}
	tick(revisionInterval) // 5 - 10 <= 0
	rev.Store(100)
	clock.advance(revisionInterval - time.Second) // not due yet
	tick(time.Second, 90)
	tick(revisionInterval) // unchanged: skipped
	rec.fail.Store(true)
	rev.Store(200)
	tick(revisionInterval) // fails
	rec.fail.Store(false)
	tick(revisionInterval, 190) // retried
	c.Pause()
	rev.Store(300)
	tick(revisionInterval)
	c.Resume()
	tick(revisionInterval, 290)
}

// Periodic mode with a retention of 1s samples the revision every 100ms,
// first compacts once 1s has passed, at the revision of 1s before, and
// from then on every 1s at the oldest sample of its window.
func TestPeriodicMode(t *testing.T) {
	var rev atomic.Int64
	rev.Store(1000)
	clock, rec, _ := startCompactor(t, ModePeriodic, time.Second, &rev)
	clock.waitBlocked(t) // sampled 1000 at t=0
	var got []int64
	var at []int
	for tick := 1; tick <= 20; tick++ {
		rev.Store(1000 + int64(tick)) // the sample taken after this tick
		clock.advance(100 * time.Millisecond)
		clock.waitBlocked(t)
		if revs := rec.take(); len(revs) > 0 {
			got = append(got, revs...)
			at = append(at, tick)
		}
	}
	if len(got) != 2 || at[0] != 10 || got[0] != 1000 || at[1] != 20 || got[1] != 1009 {
		t.Fatalf("compactions at ticks %v with revisions %v, want ticks [10 20] with [1000 1009]", at, got)
	}
}

func TestParseRetention(t *testing.T) {
	for _, tc := range []struct {
		mode, in string
		want     time.Duration
		err      bool
	}{
		{ModePeriodic, "1", time.Hour, false},
		{ModePeriodic, "0", 0, false},
		{ModePeriodic, "30m", 30 * time.Minute, false},
		{ModePeriodic, "1h", time.Hour, false},
		{ModeRevision, "1000", 1000, false},
		{ModeRevision, "5m", 5 * time.Minute, false},
		{ModePeriodic, "x", 0, true},
		{ModePeriodic, "-1", 0, true},
		{"", "1", 0, true},
	} {
		got, err := ParseRetention(tc.mode, tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseRetention(%q, %q) = %v, %v; want %v, error %v", tc.mode, tc.in, got, err, tc.want, tc.err)
		}
	}
}
