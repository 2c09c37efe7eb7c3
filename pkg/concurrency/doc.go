// Package concurrency is MetaStore's drop-in replacement for etcd's
// go.etcd.io/etcd/client/v3/concurrency: sessions, mutexes, elections and
// software transactional memory built on an ordinary clientv3 client. Code
// written against etcd's package compiles against this one with only the
// import path changed (a test compiles a sample that uses every exported
// name both ways), and it behaves the same against MetaStore and etcd.
//
// # Sessions
//
// A Session is one lease kept alive in the background. Keys that a mutex
// or an election writes are attached to it, so when the process dies, or
// stops renewing for longer than the TTL, the server deletes them and the
// next waiter moves up. Session.Done closes (and Session.Ctx is cancelled)
// when renewal ends for any reason; Close also revokes the lease so the
// keys disappear at once.
//
// # Holding, and learning of loss
//
// A session holds a mutex (or leads an election) while its key is the
// oldest in the queue and its lease is alive. The session cannot see the
// leader's clock, so it keeps its own deadline (docs/coordination-safety.md
// in the repository gives the model):
//
//	deadline = s + TTL·(1 − 2ρ) − D        ρ = 0.01
//
// where s is the local send time of the last keep-alive the server
// answered with a TTL above zero (or of the Grant), and D is the lock
// delay (WithLockDelay; one second, capped at a quarter of the TTL). The
// leader cannot expire the lease before s + TTL·(1 − ρ) on any clock
// within the drift bound, so Done closes, and Ctx is cancelled, at least
// D + ρ·TTL before anybody else can be granted the mutex after a failure:
// a frozen member, a member cut off from its peers, a lost quorum or a
// lost client. The holder runs its critical section under Session.Ctx, or
// selects on Done, and stops when it ends. Session.Deadline reports the
// current deadline.
//
// To know s the session renews with one KeepAliveOnce at a time (every
// third of TTL·(1 − 2ρ) − D, retried 100 ms after a failure so a leader
// change, which re-grants every lease a whole TTL, is ridden through)
// instead of etcd's KeepAlive, whose responses do not say which request
// they answer and which declares the lease lost only after a whole TTL
// without answers counted from receipt, later than the leader's expiry.
//
// The fencing token of a Mutex is the create revision of its key
// (Mutex.IsOwner compares it; Mutex.Header().Revision is the revision the
// acquisition was read at, equal to it when the mutex was free and never
// smaller). Both increase strictly from one holder to the next. A
// resource that remembers the highest token it has seen and refuses
// smaller ones is safe even from a holder that ignores Done or was frozen
// past its deadline; writes to the store itself can be made conditional
// with IsOwner in a Txn.
//
// # Differences from etcd
//
// Names and signatures are etcd's. A session ends earlier than etcd's
// would, never later: at its deadline rather than a TTL after the last
// answer; and a session adopting a lease (WithLease) renews it once
// before NewSession returns, starting already ended when that renewal
// fails, where etcd's ends at the first failed answer. Mutex.Lock and
// TryLock give back a mutex acquired by a session that has expired and
// return ErrSessionExpired, where etcd's would report success. WithLockDelay
// and Session.Deadline are additions.
//
// # The waiting queue
//
// Mutex and Election share one data layout: every participant owns exactly
// one key, prefix + "/" + hex(lease ID), attached to its session's lease.
// The participant whose key has the smallest create revision holds the lock
// (or leads); everyone else waits. For a mutex named "/jobs/lock" and three
// sessions with leases 0x6a, 0x6b and 0x6c that called Lock in that order:
//
//	key              create revision   role
//	/jobs/lock/6a    41                holder
//	/jobs/lock/6b    42                waits for 6a to be deleted
//	/jobs/lock/6c    45                waits for 6b to be deleted
//
// Each waiter watches only its immediate predecessor, the key with the
// largest create revision below its own, so releasing the lock wakes one
// client, not all of them (no thundering herd). When the predecessor goes
// away the waiter looks again, because the predecessor may have been a
// waiter that gave up rather than the holder, and only returns once no key
// below its own is left. Order is therefore FIFO by create revision, and a
// waiter whose context is cancelled deletes its own key on the way out, so
// an abandoned waiter never blocks the queue until its lease expires.
//
// Acquisition is a single transaction in the uncontended case: "if my key
// does not exist, create it, else read it; and in both cases read the
// oldest key under the prefix". A session that already holds the key (for
// example a process restarted with WithLease) re-enters without queueing.
//
// # STM
//
// NewSTM runs a function against a transactional view of the store and
// commits its writes with one Txn guarded by comparisons on what it read,
// retrying the function from scratch when the guard fails. The isolation
// level decides the guard and where reads come from:
//
//   - SerializableSnapshot (the default): all reads come from the revision
//     of the first read; commit requires every read key to be unchanged and
//     every written key to be unmodified since that revision.
//   - Serializable: reads as above; commit requires the read keys unchanged.
//   - RepeatableReads: each key is read once (serializable reads) and
//     cached; commit requires the read keys unchanged.
//   - ReadCommitted: reads are not guarded; the commit always applies.
//
// When a serializable commit fails, the same round trip returns the current
// values of the keys it read (the Txn's Else branch), and the retry starts
// from them instead of reading them again.
package concurrency
