// Package lock provides distributed locks that stay safe when a holder
// stalls: every held lock carries a fencing token, writes can be guarded so
// they only apply while the lock is still held, and losing the lock is
// reported on a channel.
//
// etcd's mutex (and pkg/concurrency, its drop-in) hands out a lock and
// forgets it: a holder that pauses longer than its lease TTL (a GC pause, a
// stopped VM, SIGSTOP) wakes up believing it still holds the lock while
// another process already took it, and its writes race the new holder's.
// This package closes that gap in three ways:
//
//   - Fencing token. Lock.FencingToken is the create revision of the
//     holder's key. It strictly increases across successive holders of a
//     name (a holder's key is the oldest in the queue when it acquires, and
//     revisions are never reused), so any resource can reject requests that
//     carry a token lower than one it has already seen.
//   - Guard. Lock.Guard turns KV operations into one transaction that
//     applies them only if the holder's key still exists with that create
//     revision: a stalled holder's guarded write fails with
//     ErrOwnershipLost instead of landing after the new holder's.
//   - Loss notification. Lock.Lost is closed as soon as the client learns
//     the lock is gone: the lease expired or could not be renewed for a
//     whole TTL, the key was deleted, or the local TTL deadline passed
//     without a renewal. The holder selects on it to stop work.
//
// # Layout
//
// A Locker with prefix P keeps lock N in the same queue layout as etcd's
// mutex and `etcdctl lock` (see pkg/concurrency): one key per contender,
// P + N + "/" + hex(lease ID), attached to a lease of its own, the oldest
// key holding the lock. With an empty prefix, `etcdctl lock jobs` and
// Locker.Lock(ctx, "jobs") therefore exclude each other. For example, with
// P = "/locks/" and N = "billing":
//
//	/locks/billing/694d7c1e2f0a4b11   create revision 120   holder, token 120
//	/locks/billing/694d7c1e2f0a4b15   create revision 131   next, token 131 once it holds
//
// The key's value is the owner string set with WithOwner, so operators can
// see who holds what.
//
// # Lifetime
//
// Each lock has its own lease with its own TTL (WithTTL). The lease is
// renewed in the background from the moment the contender joins the queue
// until Unlock, unless WithManualRenewal is given, in which case renewal
// stops once the lock is held and the holder calls Renew itself; a holder
// that forgets loses the lock one TTL after the last renewal. Lock retries
// transient failures (lost connection, no leader, a lease lost while
// waiting) every retry interval until its context ends.
//
// Unlock checks ownership: it deletes the key only if it is still the one
// this holder created, and reports ErrOwnershipLost when it was not (the
// lock had expired) or ErrLockNotHeld when this handle was already
// released. Within one Locker, locking a name that the Locker already holds
// fails with ErrLockAlreadyHeld instead of deadlocking behind itself, so a
// process should share one Locker.
package lock
