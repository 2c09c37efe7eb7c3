// Package clockfault is the seam through which tests step a member's
// clock, as an operator's `date -s`, an NTP step or a migrated virtual
// machine steps the leader's.
//
// The member's lessor (internal/lease) reads its time through the
// lease.Clock that LeaseClock returns. In a normal build (no build tag)
// that is nil, which the lessor takes as the system clock. In a build
// with the tag faultinject (make build-faults writes bin/metastore-faults)
// and the environment variable
//
//	METASTORE_CLOCKFAULT=file=PATH
//
// it is a clock stepped by the signed duration written in PATH ("+5m",
// "-3m30s", "0"; absent or empty means 0). The file is read again at most
// every 50 ms, when the clock is read; each new step is written to
// standard error as
//
//	clockfault: the clock is now stepped by +5m0s
//
// which is how a test knows the member has taken it.
//
// A step moves the time of day, not the elapsed time: a reading's wall
// part is moved by the step while its monotonic part stays the system's,
// exactly what a real step of the system clock does to Go's time.Now
// (CLOCK_REALTIME steps, CLOCK_MONOTONIC does not). Code that measures
// durations by subtracting readings (time.Time.Sub, as the lessor does)
// is unaffected; code that converts a reading to the time of day and
// back (Unix, Round(0), a persisted deadline) sees the step. That is the
// property test/faults/clock_test.go pins for the lease path.
package clockfault
