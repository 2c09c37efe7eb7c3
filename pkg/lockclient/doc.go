// Package lockclient is the Go client of MetaStore's HTTP lock service
// (protocol: pkg/lockapi). It follows the lock-server design's client:
//
//   - Lock sends /lock with a per-request timeout and retries only network
//     errors (the connection failed, broke, or the answer did not come
//     within Timeout), at most MaxRetries times, RetryInterval apart,
//     moving to the next endpoint each time. HTTP errors (400, 403, 409,
//     503, ...) are returned at once as *StatusError. A retry is safe: the
//     same NodeID asking again gets its existing place if the server still
//     has it.
//   - The returned Lock keeps the /lock response open: that open response
//     is what holds the lock. Lost is closed if the lock ends without
//     Unlock (the connection broke, the lease expired, the node asked
//     again elsewhere).
//   - Unlock reports the outcome (success, and the error of a failed
//     operation) and answers whether the server released the lock.
//   - Do wraps a critical section with the optional callbacks:
//     ShouldSkipOperation before asking for the lock, UpdateRefCount after
//     a successful operation while the lock is still held.
package lockclient
