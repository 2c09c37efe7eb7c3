// Package lockclient is the Go client of MetaStore's HTTP lock service
// (protocol: pkg/lockapi). It follows the lock-server design's client
// (docs/coordination.md in the repository):
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
//     again elsewhere), or at the client-side deadline.
//   - The client-side deadline: the request asks for the validity
//     (lockapi.LockRequest.ReportValidity), and every acquired or "held"
//     line says how long the member will still vouch for the lock; the
//     deadline is the receipt of the last such line plus its valid_ms.
//     When it passes with no newer line (the member froze, or the network
//     to it stalled) Lost fires and Err wraps ErrKeepAliveTimeout: the
//     service may grant the lock to someone else from the lock delay
//     (1 s by default) after that. Against a service that reports no
//     validity, any line moves the deadline to KeepAliveTimeout (3 s)
//     after its receipt; that guards nothing but a silent stream. Once
//     passed the deadline stays passed, so lines read late (a backlog
//     after this process was stopped) do not revive the lock.
//   - The bound assumes a line's time in transit, plus this process's
//     delay in acting on Lost, stays under the lock delay. Whatever it
//     cannot promise (a process stopped past its deadline, a lock used
//     after Lost), the fencing token (Token) covers: a resource that
//     refuses a token smaller than the largest it has seen ignores a stale
//     holder.
//   - Unlock reports the outcome (success, and the error of a failed
//     operation) and answers whether the server released the lock.
//   - Do wraps a critical section with the optional callbacks:
//     ShouldSkipOperation before asking for the lock, UpdateRefCount after
//     a successful operation while the lock is still held. The critical
//     section's context is cancelled when the lock is lost, and Do's error
//     then says why (ErrKeepAliveTimeout, for one).
package lockclient
