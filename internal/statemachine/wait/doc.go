// Package wait is the member's wait registry: the statemachine.Waiter
// that matches each applied proposal's result to the caller waiting for
// it, by the proposal's request ID, and ends the waits apply never
// answers (a deadline passed, the member stopped). It lives beside the
// state machine, not in it: it reads the wall clock for those deadlines,
// which apply never does. IDs generates the request IDs it is keyed by.
package wait
