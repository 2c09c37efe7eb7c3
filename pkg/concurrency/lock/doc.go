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
//   - Loss notification. Lock.Lost is closed, and Lock.Context
//     cancelled, when the holder must assume the lock is gone: at the
//     holder deadline (below) without a later confirmed renewal, or as
//     soon as the server says the lease is gone or the key is deleted.
//     The holder runs its critical section under Context, or selects on
//     Lost, to stop work.
//
// # Holding, and the holder deadline
//
// A Lock holds while its key is the oldest in the queue and its lease is
// alive. The holder cannot see the leader's clock; it keeps a deadline of
// its own (docs/coordination-safety.md in the repository gives the model):
//
//	deadline = s + TTL·(1 − 2ρ) − D        ρ = 0.01
//
// s is the local send time of the last renewal the server answered with a
// TTL above zero (or of the Grant), D the lock delay (WithLockDelay or
// Config.LockDelay; one second, capped at a quarter of the TTL, at most
// half of it). The leader cannot expire the lease before s + TTL·(1 − ρ)
// on any clock within the drift bound, and nobody else is granted the
// lock before that, so after any failure (a frozen member, a member cut
// off from its peers, a lost quorum) the holder is told at least D + ρ·TTL
// before the next grant. Lock.Deadline reports it; IsExpired compares it
// with the clock. To know s, renewals are single KeepAliveOnce calls whose
// send times are recorded, every third of the validity, retried 100 ms
// after a failure so a leader change (which re-grants every lease a whole
// TTL) is ridden through. Once the deadline passes renewal stops for good:
// a holder told of its loss never keeps the lock alive behind its back.
// A clean Unlock frees the lock at once, whatever D is.
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
// that forgets loses the lock at the deadline of its last renewal.
//
// # Request timeout
//
// Every request a lock makes on its caller's behalf is bounded by the
// request timeout (WithRequestTimeout, Config.RequestTimeout; 7 s,
// etcd's default, unless set), so a call through a member that cannot
// answer (frozen, cut off from its peers) fails within it rather than
// after gRPC's keepalive gives the connection up. Lock retries transient
// failures (lost connection, no leader, a lease lost while waiting)
// every retry interval, but spends at most the request timeout without a
// place in the queue at a stretch, counted from the call's start or from
// the moment a waiter lost its place; past it, Lock fails with an error
// wrapping context.DeadlineExceeded. Only the wait in line, behind
// holders, is bounded by the caller's context alone. An Unlock the
// member does not answer within the request timeout gives the lock up:
// renewal stops and the key goes when the lease expires.
//
// Unlock checks ownership: it deletes the key only if it is still the one
// this holder created, and reports ErrOwnershipLost when it was not (the
// lock had expired) or when the lock had been lost before, and
// ErrLockNotHeld when this handle was already released. Within one Locker, locking a name that the Locker already holds
// fails with ErrLockAlreadyHeld instead of deadlocking behind itself, so a
// process should share one Locker.
package lock
