// Package server is one MetaStore member: the glue between client requests,
// Raft and the replicated state.
//
// # The write path
//
//	client RPC ─▶ propose (kv.go) ─▶ raftnode.Propose ─▶ WAL fsync on a quorum
//	         ◀─ wait.Registry ◀─ statemachine.Apply ◀─ committed entries
//
// A write becomes an etcdserverpb.InternalRaftRequest with a request ID
// unique across members and restarts (wait.IDs), is proposed, and the
// caller waits on the wait registry (internal/statemachine/wait) for that
// ID, which also ends
// the wait at the request timeout (one expiry loop, no timer per request)
// or when the member stops. The replicated state machine
// (internal/statemachine, the raftnode.StateMachine) applies every
// committed entry in log order to the MVCC store (internal/kvstore), the
// lease table (internal/lease), the auth store, the member list
// (internal/cluster/membership) and the alarms, behind the alarm, auth and quota
// gates. A batch of entries becomes one store batch; only after that batch
// is committed and visible to readers are the waiting callers released. A
// write is therefore acknowledged only once it is durable on a quorum and
// applied here.
//
// This package is the member runtime around it: it proposes, waits,
// forwards what only the leader answers, runs the lifecycle, snapshots
// and corruption checks. It applies nothing itself, and decides before
// proposing what apply must not (lease IDs and TTLs, request IDs, the
// auth revision a request was checked at), so apply stays deterministic.
//
// # The read path
//
// A linearizable read (Range, read-only Txn, MemberList with Linearizable)
// first waits in raftnode.LinearizableRead until this member has applied
// the commit index a ReadIndex round confirmed after the read arrived;
// concurrent reads share one round. A serializable read goes straight to
// the store's latest committed snapshot. Reads never take the apply path's
// locks.
//
// # Other responsibilities
//
//   - cluster*.go: identity (member and cluster IDs derived as etcd does),
//     bootstrap of new and joining members, membership changes through Raft
//     conf changes, and keeping the peer transport's peer list in step.
//   - forward*.go: the leader's side of the requests only it can answer
//     (lease keep-alive and time-to-live, learner promotion), forwarded to
//     it over the transport; the caller's side, keep-alives in batches with
//     one in flight per member, is internal/cluster/forward.
//   - The watch hub (internal/watch) gets the events each store commit
//     returns, from the state machine, and never blocks it.
//   - notices.go: the loop that acts on what apply leaves for the member
//     to do through raft (raise its NOSPACE alarm, then answer the
//     requests held for it; record the cluster version as a new leader).
//   - alarm.go, quota.go, lease.go: the member's side of alarms (raising
//     its own), of the quota (refusing before proposing) and of leases
//     (promotion with leadership, keep-alives at the leader).
//   - lifecycle.go: who starts and stops what. New builds the member in
//     one direction (open the store, build the state machine, start raft,
//     start serving; each part is given what it needs when built: the
//     state machine (Server.stateMachine) and the lease table get the
//     parts they use, never the Server, and what apply leaves for the
//     member to do through raft goes by statemachine.Notices), and
//     shutdown stops the parts in reverse, each by its owner: the server
//     creates and stops the transport, the peer servers, and
//     every goroutine it starts (supervise, publishAttributes, serving, and the
//     work beside apply that holds the store, such as a defragmentation).
//     Stop returns once all of it has ended.
//   - snapshot.go: the client snapshot (`etcdctl snapshot save`), a
//     point-in-time image streamed from a store read view (package
//     backup). Turning such a file into a new member's data dir is
//     internal/member/restore's, offline.
//
// The package knows nothing of the client API. pkg/etcdcompat exposes all
// of this as etcd's gRPC services, over its own etcdcompat.Member
// interface; internal/member, the composition root, builds both and
// adapts one to the other, and drains the client services when the
// member begins to stop (Config.BeforeStop).
package server
