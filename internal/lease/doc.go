// Package lease implements etcd's leases: time-to-live contracts that keys
// can be attached to, kept alive by clients and revoked, by a client or by
// expiry, deleting every attached key.
//
// # Two halves
//
// A Lessor holds two kinds of state with different rules.
//
// The lease table is replicated state. Each lease has an ID, a granted TTL,
// a checkpointed remaining TTL (0 = none) and the set of keys attached to
// it. It changes only in apply, through ApplyGrant, ApplyRevoke and
// ApplyCheckpoint (one per Raft entry type) and the store's Attach/Detach
// calls (Lessor implements kvstore.LeaseTable). Apply reads no clock, draws
// no random numbers and iterates no map in an order that matters, so every
// member applying the same log holds the same table and writes the same
// bytes (TestApplyIsDeterministic feeds a leader and a follower the same
// entries and compares both).
//
// The clock is local to the leader. Only a primary lessor (Promote) gives
// leases an expiry; on followers every lease lives "forever" and nothing
// expires. An expired lease is not deleted by the clock: the expiry loop
// proposes LeaseRevoke through Raft (Proposer), and the revoke happens when
// that entry applies, on every member alike. Renew (a keep-alive) and
// TimeToLive read the clock and so are answered by the primary only
// (ErrNotPrimary elsewhere; the server forwards them to the leader).
//
// # Leadership
//
// Promote is called once this member leads and has applied every entry of
// earlier terms. It restarts every lease's clock at the checkpointed
// remaining TTL, or the full TTL, plus an extension (the election
// timeout), so a lease never expires early because leadership moved; when
// at least RevokeRate leases would expire within one second, later ones are
// pushed back so each second holds at most 3/4 of RevokeRate expiries.
// Demote stops the clock. Time spent as a follower never counts.
//
// Checkpoints keep elections from renewing a lease forever: every
// CheckpointInterval (etcd: 5 minutes) the primary proposes the remaining
// TTL of each lease whose TTL exceeds the interval (LeaseCheckpoint, up to
// 1,000 per entry), and a new primary starts from that remainder. A
// keep-alive of a checkpointed lease first proposes a checkpoint of 0 so the
// renewal is not undone by the next election.
//
// # Timing bound
//
// Leases are measured on the leader's monotonic clock: the lessor only
// ever subtracts two readings of its Clock (time.Time.Sub, which uses the
// monotonic reading), so a step of the time of day on the leader (an
// operator's date -s, an NTP step; internal/faults/clockfault injects one)
// moves no expiry. For a lease granted, or last kept alive, with TTL t:
//
//   - never early: it is not revoked before t has passed since the grant
//     or keep-alive was sent. Its clock starts when the primary applies
//     the grant or receives the keep-alive, after the request was sent; a
//     new leader restarts it at the checkpointed remainder or the full
//     TTL, plus the election timeout E.
//   - never forever: while one leader holds, it is revoked within t + R
//     of the answer, where R is one revoke round: the expiry loop waking,
//     a ReadIndex confirming the leader, the LeaseRevoke's commit and
//     apply (milliseconds on a healthy cluster). A leadership change
//     restarts it on the new leader at promotion with its checkpointed
//     remainder (leases whose TTL exceeds CheckpointInterval) or its full
//     TTL, plus the election timeout E. So it is revoked within
//     t + E + R of the later of its answer and the last leadership change
//     during its life. A round lost to a leader change or a dropped
//     proposal is tried again ExpiredRetryInterval later; more than
//     RevokeRate leases expiring in the same second are spread over
//     ceil(n/RevokeRate) seconds.
//
// etcd 3.6 gives the same bound (its lessor also measures with the
// monotonic clock and extends leases by the election timeout on
// promotion; its expiry loop looks every 500 ms, so its R is up to half a
// second longer); test/faults/clock_test.go checks it on both servers with
// R = 5 s (room for a loaded machine), across a killed leader, and with the leader's clock stepped by
// minutes forward and backward on MetaStore's fault-injection build.
//
// # Expiry loop and rate limits
//
// The primary keeps leases in a binary min-heap ordered by the next time
// the loop must look at them (their expiry, or a retry time). The loop
// sleeps until the top is due; it never scans the lease set. In each 500 ms
// window it hands at most RevokeRate/2 expired leases (etcd: 1,000 per
// second) to 16 revoke workers, each proposing one LeaseRevoke at a time,
// after confirming through a ReadIndex round that this member still leads.
// A handed-out lease is looked at again ExpiredRetryInterval later, in case
// its revoke never applied. 100,000 leases expiring at once are thus
// revoked over 100 seconds in batches, and client writes keep flowing.
// Checkpoints are proposed in the same loop, at most CheckpointRate/2
// entries per window.
//
// # Persistence
//
// Each lease is one record in the store's auxiliary bucket 'l', written in
// the same store batch as the entry that changed it (grant, checkpoint) or
// deleted with it (revoke): key = the lease ID as 8 big-endian bytes, value
// = etcd's leasepb.Lease message. For lease 0x694d77a0e6d1b00f granted 60 s
// and checkpointed at 42 s:
//
//	key    'l' 69 4d 77 a0 e6 d1 b0 0f
//	value  08 8f e0 c6 b6 8e f4 dd a6 69   field 1 (ID), varint
//	       10 3c                          field 2 (TTL) = 60
//	       18 2a                          field 3 (RemainingTTL) = 42
//
// Attached keys are not persisted here: every stored key-value already
// carries its lease ID. On start (kvstore.Open) and snapshot restore the
// store re-attaches live leased keys while it rebuilds its index, before
// Recover has read the records; those attachments wait in a pending set
// that Recover merges into the table it reads from bucket 'l'.
//
// # Invariants
//
//   - A key is attached to at most one lease, the one in its latest
//     revision (the store detaches from the old lease when a put moves it
//     or a delete removes it).
//   - A revoke deletes its keys in ascending key order as one write, which
//     takes one revision (none if the lease had no keys), and deletes the
//     lease record in the same batch.
//   - Expiry, remaining TTL and the heaps exist only on a primary lessor;
//     they never reach the table or the persisted records.
//   - The TTL an entry carries is final: the proposer raises it to MinTTL
//     (NormalizeTTL) before proposing, so members configured with different
//     election timeouts still agree. A TTL above MaxTTL is refused both
//     before proposing and in apply.
package lease
