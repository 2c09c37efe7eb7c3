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
// next waiter moves up. Session.Done closes when renewal ends for any
// reason; Close also revokes the lease so the keys disappear at once.
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
