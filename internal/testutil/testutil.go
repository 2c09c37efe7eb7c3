// Package testutil holds helpers shared by the unit tests of several
// packages. It is imported only from _test.go files.
package testutil

import (
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
