package server

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/membership"
	"github.com/metastore-io/metastore/internal/raftnode"
	"github.com/metastore-io/metastore/internal/statemachine"
	"github.com/metastore-io/metastore/internal/watch"
)

type pendingResult struct {
	id  uint64
	res statemachine.Result
	// afterAlarm holds the answer back until this member's NOSPACE alarm
	// is raised, so the client that hit the quota sees the alarm (etcd).
	afterAlarm bool
}

// applier is the state machine behind Raft (raftnode.StateMachine): it
// applies committed entries to the MVCC store and the member list, and
// decides which conf changes take effect (raftnode.ConfChangeValidator,
// cluster_apply.go).
//
// Invariant: everything it does is a function of the entries alone — no
// wall clock, randomness or map iteration order — so every member that
// applies the same log reaches the same state and the same hashes.
//
// A batch of entries is applied into one store batch, committed once, and
// only then are the waiting proposers told their results: a client never
// sees an acknowledgement for a write that readers cannot yet see.
type applier struct {
	applyDeps
	results []pendingResult // reused across batches
	// membersChanged is set when the batch changed the member list; the
	// transport's peers follow once the batch is committed.
	membersChanged bool
	// raiseNoSpace is set when an entry of the batch exceeded the quota
	// and this member has no NOSPACE alarm yet (quota.go).
	raiseNoSpace bool
	// replayedUpTo is the commit index the WAL recorded at a restart:
	// entries up to it are replays (statemachine.ApplyAuth).
	replayedUpTo uint64
}

// applyDeps are the parts of the member the applier works on, passed in
// once, when all of them exist (startRaft, just before raft starts). The
// applier holds no Server: raft starts applying before New has finished,
// so it must not reach anything New builds later. What apply leaves for
// the member to do through raft goes to notices, which the member acts
// on once raft runs.
type applyDeps struct {
	log       *slog.Logger
	kv        *kvstore.Store
	leases    *memberLeases
	cluster   *membership.Cluster
	auth      *auth.Store
	hub       *watch.Hub
	alarms    *statemachine.Alarms
	quota     statemachine.Quota
	ops       *opsMetrics
	metrics   *serverMetrics
	wait      *waitRegistry
	applied   *statemachine.Watermark // the applied raft index
	compacted *statemachine.Watermark // the finished compaction revision
	notices   *statemachine.Notices
	// peersChanged brings the transport and the member's own standing
	// in line with the member list (Server.syncPeers); fatal stops the
	// member (Server.fatal). Both use only parts built before the
	// applier.
	peersChanged func()
	fatal        func(msg string, err error)
}

func newApplier(d applyDeps) *applier { return &applier{applyDeps: d} }

var (
	_ raftnode.StateMachine        = (*applier)(nil)
	_ raftnode.ConfChangeValidator = (*applier)(nil)
	_ raftnode.IdleWorker          = (*applier)(nil)

	_ raftnode.RecoveredCommitObserver = (*applier)(nil)
)

// RecoveredCommit records where the replay of a restart ends.
func (a *applier) RecoveredCommit(index uint64) { a.replayedUpTo = index }

// IdleWork commits the next step of a compaction in progress while no
// entries wait, so that an idle member finishes deleting the old
// revisions too (kvstore's compaction goes one bounded step per Commit).
// The step changes nothing observable, so when it runs is free to differ
// between members.
func (a *applier) IdleWork() (bool, error) {
	if !a.kv.Compacting() {
		return false, nil
	}
	if _, err := a.kv.Commit(); err != nil {
		return false, fmt.Errorf("commit a compaction step: %w", err)
	}
	statemachine.NoteCompaction(a.kv, a.compacted)
	return a.kv.Compacting(), nil
}

// AppliedIndex is the index of the last entry the store holds.
func (a *applier) AppliedIndex() uint64 {
	index, _ := a.kv.ConsistentIndex()
	return index
}

// Apply applies committed entries in log order, commits them to the store
// as one batch, hands their events to the watch hub and answers their
// proposers. An error (the store can no longer follow the log) stops the
// raft node, and with it the member.
func (a *applier) Apply(entries []raftpb.Entry) error {
	kv := a.kv
	applied := a.AppliedIndex()
	for i := range entries {
		e := &entries[i]
		if e.Index <= applied {
			// Already in the store: replay after a crash of an engine that
			// persisted beyond the last snapshot.
			continue
		}
		switch e.Type {
		case raftpb.EntryNormal:
			a.applyNormal(e)
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			a.applyConfChange(e) // cluster_apply.go
		}
		kv.SetConsistentIndex(e.Index, e.Term)
	}
	events, err := kv.Commit()
	if err != nil {
		// The store can no longer follow the log; continuing would diverge.
		for _, r := range a.results {
			a.wait.Trigger(r.id, statemachine.Result{Err: ErrStopped})
		}
		a.results = a.results[:0]
		return fmt.Errorf("commit applied entries to the store: %w", err)
	}
	if len(events) > 0 {
		// Never blocks on watchers.
		a.hub.Publish(kv.Rev(), events)
	}
	statemachine.NoteCompaction(kv, a.compacted)
	if n := len(entries); n > 0 {
		a.applied.Advance(entries[n-1].Index)
	}
	var held []statemachine.Pending
	for _, r := range a.results {
		if r.afterAlarm && a.raiseNoSpace {
			held = append(held, statemachine.Pending{ID: r.id, Result: r.res})
			continue
		}
		a.wait.Trigger(r.id, r.res)
	}
	clear(a.results)
	a.results = a.results[:0]
	if a.raiseNoSpace {
		a.raiseNoSpace = false
		a.notices.Post(statemachine.Notice{Kind: statemachine.NoticeNoSpace, Held: held}) // quota.go
	}
	if a.membersChanged {
		a.membersChanged = false
		a.peersChanged()
	}
	return nil
}

func (a *applier) applyNormal(e *raftpb.Entry) {
	if len(e.Data) == 0 {
		// A new leader's empty entry.
		if a.leases.leaderEntryApplied(e.Term) && a.cluster.Version() == "" {
			// Leading, the first entry of the term applied, and no
			// cluster version recorded yet (clusterversion.go).
			a.notices.Post(statemachine.Notice{Kind: statemachine.NoticeClusterVersion, Term: e.Term})
		}
		return
	}
	var req pb.InternalRaftRequest
	if err := req.Unmarshal(e.Data); err != nil {
		// Every member sees the same bytes, so skipping is deterministic.
		a.log.Error("skipping undecodable entry", "index", e.Index, "error", err)
		return
	}
	start := time.Now()
	res, raise := a.applyRequest(&req, e.Index)
	// Wall-clock time only feeds metrics, never the state.
	a.metrics.observeApply(a.log, applyOpOf(&req), res.Err, time.Since(start))
	a.raiseNoSpace = a.raiseNoSpace || raise
	if req.Header != nil && req.Header.ID != 0 {
		a.results = append(a.results, pendingResult{id: req.Header.ID, res: res, afterAlarm: raise})
	}
}

// applyRequest applies one request behind etcd's applier chain: the alarm
// gates (corrupt, capped), then the request, then the quota check; raise
// reports that the request exceeded the quota and this member must raise
// its NOSPACE alarm.
func (a *applier) applyRequest(req *pb.InternalRaftRequest, index uint64) (res statemachine.Result, raise bool) {
	if err := a.alarms.Gate(req); err != nil {
		return statemachine.Result{Err: err}, false
	}
	fits := true
	if q := statemachine.QuotaRequest(req); q != nil {
		fits = a.quota.Available(statemachine.QuotaCost(q))
	}
	res = a.dispatch(req, index)
	return res, statemachine.NoSpaceAfterApply(a.log, a.quota, a.alarms, fits, &res)
}

func (a *applier) dispatch(req *pb.InternalRaftRequest, index uint64) statemachine.Result {
	kv := a.kv
	if err := statemachine.Authorize(a.auth, a.leases.lessor.Keys, req); err != nil {
		return statemachine.Result{Err: err}
	}
	if statemachine.IsAuthRequest(req) {
		return statemachine.ApplyAuth(a.auth, kv, req, index, a.replayedUpTo)
	}
	var res statemachine.Result
	switch {
	case req.Put != nil:
		res.Resp, res.Err = kv.Put(req.Put)
	case req.DeleteRange != nil:
		res.Resp, res.Err = kv.DeleteRange(req.DeleteRange)
	case req.Txn != nil:
		res.Resp, res.Err = kv.Txn(req.Txn)
	case req.LeaseGrant != nil:
		res.Resp, res.Err = statemachine.ApplyLeaseGrant(a.leases.lessor, kv, req.LeaseGrant)
	case req.LeaseRevoke != nil:
		res.Resp, res.Err = statemachine.ApplyLeaseRevoke(a.leases.lessor, kv, req.LeaseRevoke)
	case req.LeaseCheckpoint != nil:
		res.Resp, res.Err = statemachine.ApplyLeaseCheckpoint(a.leases.lessor, kv, req.LeaseCheckpoint)
	case req.Compaction != nil:
		res.Resp, res.Err = kv.Compact(req.Compaction.Revision)
	case req.Alarm != nil:
		res.Resp, res.Err = statemachine.ApplyAlarm(a.log, kv, a.alarms, req.Alarm)
		a.ops.alarmsChanged(a.alarms.Get(pb.AlarmType_NONE))
	case req.ClusterMemberAttrSet != nil:
		a.cluster.SetAttributes(kv, req.ClusterMemberAttrSet.Member_ID, req.ClusterMemberAttrSet.MemberAttributes)
		res.Resp = &membershippb.ClusterMemberAttrSetRequest{}
	case req.ClusterVersionSet != nil:
		a.cluster.SetVersion(kv, req.ClusterVersionSet.Ver)
		res.Resp = &membershippb.ClusterVersionSetRequest{}
	default:
		res.Err = ErrNotImplementedOp
	}
	return res
}

// Snapshot returns the store's image as of the last Apply.
func (a *applier) Snapshot() (raftnode.Image, error) {
	return a.kv.SnapshotView(), nil
}

// Restore replaces the store and the member list with a snapshot image.
func (a *applier) Restore(r io.Reader, meta raftpb.SnapshotMetadata) error {
	kv := a.kv
	if err := a.leases.lessor.Restore(func() error { return kv.Restore(r) }, kv); err != nil {
		return fmt.Errorf("restore store from snapshot at index %d: %w", meta.Index, err)
	}
	// The revision jumped: watchers catch up on what they missed from the
	// restored store.
	a.hub.Publish(kv.Rev(), nil)
	statemachine.NoteCompaction(kv, a.compacted)
	if err := a.auth.Reload(kv); err != nil {
		return fmt.Errorf("reload users and roles from snapshot at index %d: %w", meta.Index, err)
	}
	if err := a.cluster.Load(kv); err != nil {
		return fmt.Errorf("reload member list from snapshot at index %d: %w", meta.Index, err)
	}
	if err := a.alarms.Load(kv); err != nil {
		return fmt.Errorf("reload alarms from snapshot at index %d: %w", meta.Index, err)
	}
	a.ops.alarmsChanged(a.alarms.Get(pb.AlarmType_NONE))
	a.peersChanged()
	return nil
}
