// Package dlock is the distributed-lock component of the dlock design
// (shared/design/dlock.md) on MetaStore: a Locker with exactly Lock
// (blocking), TryLock (non-blocking), Unlock and Close, options WithTTL
// and WithLogger, a key prefix, a default TTL of 10 s, and the errors
// ErrConfigNil, ErrConnectorNil, ErrLockNotHeld, ErrLockAlreadyHeld and
// ErrOwnershipLost.
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
//     while waiting) are retried every RetryInterval. It does not poll: a
//     release wakes exactly the next waiter.
//   - TryLock returns (false, nil) when another owner holds the key.
//   - Within one Locker a key is held at most once: Lock or TryLock of a
//     key it holds fails with ErrLockAlreadyHeld instead of deadlocking.
//   - The watchdog: a held lock's lease (TTL from WithTTL, else
//     Config.DefaultTTL, else 10 s; rounded up to whole seconds) is renewed
//     in the background about every TTL/3. If renewal fails for a whole
//     TTL, or the key disappears, the lock is lost: the component logs
//     "watchdog renew failed" and "ownership lost", and Unlock reports
//     ErrOwnershipLost.
//   - Unlock deletes the key only if it is still this holder's; it returns
//     ErrLockNotHeld for a key this Locker does not hold.
//   - Close stops every watchdog and releases every lock still held; the
//     Locker refuses further calls with ErrClosed.
//
// Logs carry component=dlock; the events are "lock acquired", "lock
// released", "watchdog renew failed" and "ownership lost".
package dlock
