// Package lock is the coord module's distributed lock (DistributedLock,
// Lock, the errors) on pkg/concurrency/lock, MetaStore's fenced lock.
//
// Every acquisition has its own lease with the TTL asked for (rounded up
// to whole seconds), renewed in the background until Unlock, as the
// design's session per lock. Acquire waits in FIFO order; TryAcquire
// fails with ErrLockConflict when another owner holds the key. Two
// acquisitions of one key in one process queue like any two owners.
//
// # Holding, and learning of loss
//
// A Lock holds while its key is the oldest in the queue and its lease is
// alive. The holder keeps a deadline on its own clock, the holder deadline
// of pkg/concurrency/lock (docs/coordination-safety.md in the repository
// gives the model):
//
//	deadline = s + TTL·(1 − 2ρ) − D        ρ = 0.01, D = min(1 s, TTL/4)
//
// where s is the send time of the last renewal the server confirmed. The
// leader cannot expire the lease before s + TTL·(1 − ρ), and nobody else
// is granted the key before that, so after a failure (a frozen member, a
// cut link, a lost quorum) the holder is told at least D before the next
// grant: from the deadline on IsExpired answers true without a round
// trip, Renew, TTL and Unlock fail with ErrLockExpired, and the context
// of Holder.Context (every Lock a Factory returns implements Holder) is
// cancelled with a cause wrapping ErrLockExpired. Run the critical
// section under that context.
//
// The key's create revision is the lock's fencing token
// (pkg/concurrency/lock's FencingToken, logged with "lock acquired"): it
// increases strictly from one holder to the next, so a resource that
// refuses smaller tokens than it has seen is safe from a holder that kept
// working past its deadline.
package lock
