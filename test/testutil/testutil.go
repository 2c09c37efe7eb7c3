// Package testutil holds helpers shared by the unit tests of several
// packages. It is imported only from _test.go files.
package testutil

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// pollInterval is how often WaitFor re-checks its condition.
const pollInterval = time.Millisecond

// WaitFor polls cond until it holds, failing the test after timeout. It is
// for internal state that has no event of its own to wait on; anything
// that does have one should wait on it instead.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// SyncBuffer is a log sink that a test reads while the code under test
// writes to it from other goroutines.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
