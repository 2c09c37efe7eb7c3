package testutil

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitForReturnsOnceTrue(t *testing.T) {
	var n atomic.Int32
	WaitFor(t, 10*time.Second, "three polls", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("polled %d times, want 3", n.Load())
	}
}

// failRecorder captures Fatalf instead of ending the test.
type failRecorder struct {
	testing.TB
	failed bool
}

func (f *failRecorder) Helper() {}
func (f *failRecorder) Fatalf(string, ...any) {
	f.failed = true
	panic(f)
}

func TestWaitForFailsAtDeadline(t *testing.T) {
	rec := &failRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != rec {
				panic(r)
			}
		}()
		WaitFor(rec, 20*time.Millisecond, "never", func() bool { return false })
	}()
	if !rec.failed {
		t.Fatal("WaitFor did not fail when the condition never held")
	}
}
