// Package forward is how one member asks another over the peer
// transport: a follower forwards what only the leader can answer (lease
// keep-alives and time-to-live queries, a learner's promotion), and a
// leader asks a learner how far it has caught up. The serving side, the
// handlers, is the member runtime's (internal/server); this package holds
// the caller's side and the wire format both share:
//
//   - codec.go: the reply format, which carries the serving member's
//     error as the same sentinel error on the caller's side;
//   - call.go: the methods and one forwarded call;
//   - renew.go: keep-alives forwarded in batches, one batch in flight per
//     member, re-targeted at once when raft reports a new leader so that
//     no keep-alive waits behind a batch stuck on a frozen or cut-off one.
package forward
