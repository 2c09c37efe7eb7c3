// Package dlock is the distributed-lock component of the dlock design
// (docs/coordination.md in the repository) on MetaStore: a Locker with
// exactly Lock (blocking), TryLock (non-blocking), Unlock and Close,
// options WithTTL and WithLogger, a key prefix, a default TTL of 10 s, and
// the errors ErrConfigNil, ErrConnectorNil, ErrLockNotHeld,
// ErrLockAlreadyHeld and ErrOwnershipLost.
//
// It is a thin layer over pkg/concurrency/lock, MetaStore's fenced lock
// (no second lock implementation): every held key is one lock of one
// lock.Locker, so the layout, FIFO queueing and fencing are that
// package's. The design's etcd driver is this one ("etcd", or
// "metastore"; it works against MetaStore and etcd alike). The design's
// Redis driver (SET NX, token-checked Lua unlock) is out of scope: MetaStore
// is not Redis, and New refuses DriverRedis.
//
// # Semantics
//
//   - Lock waits in the key's FIFO queue until it holds the lock or ctx
//     ends; transient failures (lost connection, no leader, a lease lost
//     while waiting) are retried every RetryInterval, for at most the
//     request timeout (7 s) at a stretch without a place in the queue. It
//     does not poll: a release wakes exactly the next waiter.
//   - TryLock returns (false, nil) when another owner holds the key.
//   - Within one Locker a key is held at most once: Lock or TryLock of a
//     key it holds fails with ErrLockAlreadyHeld instead of deadlocking.
//   - The watchdog: a held lock's lease (TTL from WithTTL, else
//     Config.DefaultTTL, else 10 s; rounded up to whole seconds) is renewed
//     in the background about every third of its validity. The lock is
//     lost at the holder deadline, s + TTL·(1 − 2ρ) − D, where s is the
//     send time of the last renewal the server confirmed, ρ = 1% and D
//     is Config.LockDelay (one second, capped at a quarter of the TTL),
//     or as soon as the server says the lease or key is gone. The leader
//     cannot expire the lease before s + TTL·(1 − ρ), so the holder is
//     told at least D before anybody else can be granted the key after a
//     failure (a frozen member, a cut link, a lost quorum): the component
//     logs "watchdog renew failed" (when the deadline passed) and
//     "ownership lost", HoldContext's context is cancelled with a cause
//     wrapping ErrOwnershipLost, and Unlock reports ErrOwnershipLost
//     (deleting the key if it is still there, so the next waiter need not
//     wait for the lease to expire).
//   - HoldContext(locker, key) is the context to run the critical section
//     under: it ends when the lock is lost or released.
//   - Fencing: the token is the create revision of the holder's key,
//     logged with "lock acquired" (pkg/concurrency/lock's FencingToken);
//     it increases strictly from one holder to the next, so a resource
//     that refuses smaller tokens than it has seen is safe from a holder
//     that kept working past its deadline.
//   - Unlock deletes the key only if it is still this holder's; it returns
//     ErrLockNotHeld for a key this Locker does not hold. When the member
//     does not answer within the request timeout (7 s) Unlock fails, the
//     key is forgotten and its lease, no longer renewed, expires.
//   - Close stops every watchdog and releases every lock still held; the
//     Locker refuses further calls with ErrClosed.
//
// Logs carry component=dlock; the events are "lock acquired", "lock
// released", "watchdog renew failed" and "ownership lost".
package dlock
