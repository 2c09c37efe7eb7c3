// Package statemachine is MetaStore's replicated state machine: given the
// entries raft has committed, in log order, it applies each to the parts
// of the member it was built with (the MVCC store, the lease table, the
// auth store, the member list and the alarms) and answers the proposer
// waiting for it. Every member applies the same log, so every member ends
// in the same state; this package is where that has to hold.
//
// # Construction
//
// The member builds the state machine once, from its parts, before raft
// starts (New(Deps)); raft then calls it (raftnode.StateMachine). The
// state machine never receives the member: what it needs of the member is
// a few hooks (metrics, the peer set, a fatal stop), and what apply finds
// the member must do through raft it posts to Notices, which the member
// acts on. It imports nothing of internal/server.
//
// # Entry kinds
//
// An EntryNormal entry holds an etcdserverpb.InternalRaftRequest, or is
// empty. Each request passes, in this order, etcd's applier chain:
//
//  1. The alarm gates (alarm.go): with a CORRUPT alarm active every write
//     fails with ErrCorrupt; with NOSPACE active every request that grows
//     the store (a put, a txn with a put, a lease grant) fails with
//     ErrNoSpace, while deletes, revokes and compactions go on.
//  2. Authorisation (auth.go): the header names the user and the auth
//     revision the proposer checked the credentials at; the request is
//     refused if the user may not make it or the auth state moved since.
//  3. The request itself:
//     Put, DeleteRange, Txn: one revision of the MVCC store each;
//     Compaction: logical at once, the old revisions deleted in steps
//     afterwards (IdleWork while no entries wait);
//     LeaseGrant, LeaseRevoke (the lease's keys deleted in one revision),
//     LeaseCheckpoint (lease.go);
//     Alarm: GET, ACTIVATE, DEACTIVATE (alarm.go);
//     the Auth service's requests (auth.go);
//     ClusterMemberAttrSet, ClusterVersionSet, DowngradeInfoSet (a
//     downgrade job enabled or cancelled): the member list.
//  4. The quota (quota.go): a put, txn or grant that did not fit is still
//     applied, as on every member, but its proposer is answered
//     ErrNoSpace only after this member raised its NOSPACE alarm.
//
// An empty entry is a new leader's first: if this member leads in its term
// and no cluster version is recorded, apply posts NoticeClusterVersion.
//
// An EntryConfChange or EntryConfChangeV2 adds, promotes, updates or
// removes members (membership.go). raft asks ValidateConfChange just
// before applying one, and the member list's answer decides for both:
// raft's configuration changes only if the member list does. A refusal is
// recorded in the store's veto bucket, so that a replay after a restart
// decides the same way.
//
// # Invariants
//
//   - Deterministic: apply reads no wall clock (time only feeds the
//     ObserveApply metric), no randomness and no map order; lease IDs and
//     TTLs, simple-token prefixes and auth revisions come from the entry.
//     Only answers and notices may depend on the member (its size against
//     the quota, whether it leads), never the applied state.
//   - A batch of entries is one store batch, committed once; proposers are
//     answered only after that commit, so no acknowledged write is
//     invisible to readers.
//   - An entry the store already holds (index <= AppliedIndex) is skipped.
//   - The entry's index and term are recorded with its effects
//     (kvstore's consistent index) in the same batch.
//
// # Lock order
//
// StateMachine has no lock: only the apply goroutine calls it. Alarms,
// Notices and Watermark each have one mutex, a leaf: none is held while
// another is taken or while calling out.
//
// # A worked example
//
// A client's put of a=1 becomes, on the leader, the entry
//
//	{Index: 12, Term: 3, Data: InternalRaftRequest{Header: {ID: 0x9f01}, Put: {Key: "a", Value: "1"}}}
//
// Once committed, raft calls Apply with a batch holding it. No alarm is
// active; auth is off; the put applies as revision 8 of the store; the
// store is far from its quota. The batch commits, the watch hub receives
// PUT a=1 at revision 8, the applied watermark moves to 12, and the Waiter
// is triggered for request 0x9f01 with Result{Resp: &PutResponse{Header:
// {Revision: 8}}}. Had the store been over its quota, the put would still
// be revision 8 on every member, but this member's answer would wait in a
// NoticeNoSpace notice until the member had raised its alarm, then be
// ErrNoSpace. testdata/*.txt shows these cases and more, entry by entry
// (datadriven_test.go explains the commands).
package statemachine
