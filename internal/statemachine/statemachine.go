package statemachine

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/lease"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// Publisher receives the events of every store commit (the watch hub).
// Publish must not block on watchers.
type Publisher interface {
	Publish(rev int64, events []mvccpb.Event)
}

// Deps are the parts of the member the state machine works on, passed in
// once, when all of them exist (before raft starts). The state machine
// holds no member: raft starts applying before the member has finished
// starting, so it must not reach anything built later. What apply leaves
// for the member to do through raft goes to Notices.
type Deps struct {
	Log     *slog.Logger
	KV      *kvstore.Store
	Lessor  *lease.Lessor
	Cluster *membership.Cluster
	Auth    *auth.Store
	Alarms  *Alarms
	Quota   Quota
	Hub     Publisher
	Waiter  Waiter
	Notices *Notices
	// Applied is advanced to the last applied raft index after every
	// batch, Compacted to the finished compaction revision.
	Applied, Compacted *Watermark

	// LeaderEntry is told the term of every empty entry (a new leader's
	// first) and reports whether this member leads in that term; the
	// member promotes its lessor then. Only notices depend on the answer,
	// never the state.
	LeaderEntry func(term uint64) (leading bool)
	// ObserveApply times each applied request (metrics; wall-clock time
	// never reaches the state).
	ObserveApply func(req *pb.InternalRaftRequest, err error, took time.Duration)
	// AlarmsChanged is told the active alarms whenever they may have
	// changed (metrics).
	AlarmsChanged func(active []*pb.AlarmMember)
	// PeersChanged brings the transport and the member's own standing in
	// line with the member list, after a batch that changed it; Fatal
	// stops the member.
	PeersChanged func()
	Fatal        func(msg string, err error)
}

// StateMachine is the state machine behind Raft (raftnode.StateMachine):
// it applies committed entries to the MVCC store, the lease table, the
// auth store, the member list and the alarms, and decides which conf
// changes take effect (raftnode.ConfChangeValidator, membership.go).
//
// Invariant: everything it does is a function of the entries alone — no
// wall clock, randomness or map iteration order — so every member that
// applies the same log reaches the same state and the same hashes.
//
// A batch of entries is applied into one store batch, committed once, and
// only then are the waiting proposers told their results: a client never
// sees an acknowledgement for a write that readers cannot yet see.
//
// Only the apply goroutine (raftnode's) calls its methods; it has no lock
// of its own.
type StateMachine struct {
	Deps
	results []pending // reused across batches
	// membersChanged is set when the batch changed the member list; the
	// transport's peers follow once the batch is committed.
	membersChanged bool
	// raiseNoSpace is set when an entry of the batch exceeded the quota
	// and this member has no NOSPACE alarm yet (quota.go).
	raiseNoSpace bool
	// replayedUpTo is the commit index the WAL recorded at a restart:
	// entries up to it are replays (auth.go).
	replayedUpTo uint64
}

// pending is a result waiting for the batch's commit.
type pending struct {
	Pending
	// afterAlarm holds the answer back until this member's NOSPACE alarm
	// is raised, so the client that hit the quota sees the alarm (etcd).
	afterAlarm bool
}

// New builds the state machine over d. KV, Lessor, Cluster, Auth, Alarms
// and Waiter are required; a nil hook does nothing, and a nil Hub,
// Notices, Applied or Compacted is replaced by one nobody reads (tests).
func New(d Deps) *StateMachine {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Hub == nil {
		d.Hub = discardPublisher{}
	}
	if d.Notices == nil {
		d.Notices = NewNotices()
	}
	if d.Applied == nil {
		d.Applied = &Watermark{}
	}
	if d.Compacted == nil {
		d.Compacted = &Watermark{}
	}
	if d.LeaderEntry == nil {
		d.LeaderEntry = func(uint64) bool { return false }
	}
	if d.ObserveApply == nil {
		d.ObserveApply = func(*pb.InternalRaftRequest, error, time.Duration) {}
	}
	if d.AlarmsChanged == nil {
		d.AlarmsChanged = func([]*pb.AlarmMember) {}
	}
	if d.PeersChanged == nil {
		d.PeersChanged = func() {}
	}
	if d.Fatal == nil {
		d.Fatal = func(string, error) {}
	}
	return &StateMachine{Deps: d}
}

type discardPublisher struct{}

func (discardPublisher) Publish(int64, []mvccpb.Event) {}

var (
	_ raftnode.StateMachine            = (*StateMachine)(nil)
	_ raftnode.ConfChangeValidator     = (*StateMachine)(nil)
	_ raftnode.IdleWorker              = (*StateMachine)(nil)
	_ raftnode.RecoveredCommitObserver = (*StateMachine)(nil)
)

// IdleWork commits the next step of a compaction in progress while no
// entries wait, so that an idle member finishes deleting the old
// revisions too (kvstore's compaction goes one bounded step per Commit).
// The step changes nothing observable, so when it runs is free to differ
// between members.
func (sm *StateMachine) IdleWork() (bool, error) {
	if !sm.KV.Compacting() {
		return false, nil
	}
	if _, err := sm.KV.Commit(); err != nil {
		return false, fmt.Errorf("commit a compaction step: %w", err)
	}
	NoteCompaction(sm.KV, sm.Compacted)
	return sm.KV.Compacting(), nil
}

// AppliedIndex is the index of the last entry the store holds.
func (sm *StateMachine) AppliedIndex() uint64 {
	index, _ := sm.KV.ConsistentIndex()
	return index
}

// RecoveredCommit records where the replay of a restart ends.
func (sm *StateMachine) RecoveredCommit(index uint64) { sm.replayedUpTo = index }

// Apply applies committed entries in log order, commits them to the store
// as one batch, hands their events to the watch hub and answers their
// proposers. An error (the store can no longer follow the log) stops the
// raft node, and with it the member.
func (sm *StateMachine) Apply(entries []raftpb.Entry) error {
	kv := sm.KV
	applied := sm.AppliedIndex()
	for i := range entries {
		e := &entries[i]
		if e.Index <= applied {
			// Already in the store: replay after a crash of an engine that
			// persisted beyond the last snapshot.
			continue
		}
		switch e.Type {
		case raftpb.EntryNormal:
			sm.applyNormal(e)
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			sm.applyConfChange(e) // membership.go
		}
		kv.SetConsistentIndex(e.Index, e.Term)
	}
	events, err := kv.Commit()
	if err != nil {
		// The store can no longer follow the log; continuing would diverge.
		for _, r := range sm.results {
			sm.Waiter.Trigger(r.ID, Result{Err: membererr.ErrStopped})
		}
		sm.results = sm.results[:0]
		return fmt.Errorf("commit applied entries to the store: %w", err)
	}
	if len(events) > 0 {
		// Never blocks on watchers.
		sm.Hub.Publish(kv.Rev(), events)
	}
	NoteCompaction(kv, sm.Compacted)
	if n := len(entries); n > 0 {
		sm.Applied.Advance(entries[n-1].Index)
	}
	sm.answer()
	if sm.membersChanged {
		sm.membersChanged = false
		sm.PeersChanged()
	}
	return nil
}

// answer gives the batch's proposers their results, but for those held
// back until this member's NOSPACE alarm is raised, which go to the
// member in a notice.
func (sm *StateMachine) answer() {
	var held []Pending
	for _, r := range sm.results {
		if r.afterAlarm && sm.raiseNoSpace {
			held = append(held, r.Pending)
			continue
		}
		sm.Waiter.Trigger(r.ID, r.Result)
	}
	clear(sm.results)
	sm.results = sm.results[:0]
	if sm.raiseNoSpace {
		sm.raiseNoSpace = false
		sm.Notices.post(Notice{Kind: NoticeNoSpace, Held: held}) // quota.go
	}
}

func (sm *StateMachine) applyNormal(e *raftpb.Entry) {
	if len(e.Data) == 0 {
		// A new leader's empty entry.
		if sm.LeaderEntry(e.Term) && sm.Cluster.Version() == "" {
			// Leading, the first entry of the term applied, and no
			// cluster version recorded yet.
			sm.Notices.post(Notice{Kind: NoticeClusterVersion, Term: e.Term})
		}
		return
	}
	var req pb.InternalRaftRequest
	if err := req.Unmarshal(e.Data); err != nil {
		// Every member sees the same bytes, so skipping is deterministic.
		sm.Log.Error("skipping undecodable entry", "index", e.Index, "error", err)
		return
	}
	start := time.Now()
	res, raise := sm.applyRequest(&req, e.Index)
	// Wall-clock time only feeds metrics, never the state.
	sm.ObserveApply(&req, res.Err, time.Since(start))
	sm.raiseNoSpace = sm.raiseNoSpace || raise
	if req.Header != nil && req.Header.ID != 0 {
		sm.results = append(sm.results, pending{Pending: Pending{ID: req.Header.ID, Result: res}, afterAlarm: raise})
	}
}

// applyRequest applies one request behind etcd's applier chain: the alarm
// gates (corrupt, capped), then the request, then the quota check; raise
// reports that the request exceeded the quota and this member must raise
// its NOSPACE alarm.
func (sm *StateMachine) applyRequest(req *pb.InternalRaftRequest, index uint64) (res Result, raise bool) {
	if err := sm.Alarms.gate(req); err != nil {
		return Result{Err: err}, false
	}
	fits := true
	if q := quotaRequest(req); q != nil {
		fits = sm.Quota.Available(QuotaCost(q))
	}
	res = sm.dispatch(req, index)
	return res, sm.noSpaceAfterApply(fits, &res)
}

func (sm *StateMachine) dispatch(req *pb.InternalRaftRequest, index uint64) Result {
	kv := sm.KV
	if err := authorize(sm.Auth, sm.Lessor.Keys, req); err != nil { // auth.go
		return Result{Err: err}
	}
	if isAuthRequest(req) {
		return sm.applyAuth(req, index)
	}
	var res Result
	switch {
	case req.Put != nil:
		res.Resp, res.Err = kv.Put(req.Put)
	case req.DeleteRange != nil:
		res.Resp, res.Err = kv.DeleteRange(req.DeleteRange)
	case req.Txn != nil:
		res.Resp, res.Err = kv.Txn(req.Txn)
	case req.Compaction != nil:
		res.Resp, res.Err = kv.Compact(req.Compaction.Revision)
	case req.LeaseGrant != nil:
		res.Resp, res.Err = sm.applyLeaseGrant(req.LeaseGrant) // lease.go
	case req.LeaseRevoke != nil:
		res.Resp, res.Err = sm.applyLeaseRevoke(req.LeaseRevoke)
	case req.LeaseCheckpoint != nil:
		res.Resp, res.Err = sm.applyLeaseCheckpoint(req.LeaseCheckpoint)
	case req.Alarm != nil:
		res.Resp, res.Err = sm.applyAlarm(req.Alarm) // alarm.go
	case req.ClusterMemberAttrSet != nil:
		sm.Cluster.SetAttributes(kv, req.ClusterMemberAttrSet.Member_ID, req.ClusterMemberAttrSet.MemberAttributes)
		res.Resp = &membershippb.ClusterMemberAttrSetRequest{}
	case req.ClusterVersionSet != nil:
		sm.Cluster.SetVersion(kv, req.ClusterVersionSet.Ver)
		res.Resp = &membershippb.ClusterVersionSetRequest{}
	case req.DowngradeInfoSet != nil:
		// The member validated the job before proposing it; apply
		// records it as etcd's does, unchecked.
		sm.Cluster.SetDowngrade(kv, req.DowngradeInfoSet.Enabled, req.DowngradeInfoSet.Ver)
		res.Resp = &membershippb.DowngradeInfoSetRequest{}
	default:
		res.Err = membererr.ErrNotImplementedOp
	}
	return res
}

// Snapshot returns the store's image as of the last Apply.
func (sm *StateMachine) Snapshot() (raftnode.Image, error) {
	return sm.KV.SnapshotView(), nil
}

// Restore replaces the store, the lease table, the auth state, the member
// list and the alarms with a snapshot image.
func (sm *StateMachine) Restore(r io.Reader, meta raftpb.SnapshotMetadata) error {
	kv := sm.KV
	if err := sm.Lessor.Restore(func() error { return kv.Restore(r) }, kv); err != nil {
		return fmt.Errorf("restore store from snapshot at index %d: %w", meta.Index, err)
	}
	// The revision jumped: watchers catch up on what they missed from the
	// restored store.
	sm.Hub.Publish(kv.Rev(), nil)
	NoteCompaction(kv, sm.Compacted)
	if err := sm.Auth.Reload(kv); err != nil {
		return fmt.Errorf("reload users and roles from snapshot at index %d: %w", meta.Index, err)
	}
	if err := sm.Cluster.Load(kv); err != nil {
		return fmt.Errorf("reload member list from snapshot at index %d: %w", meta.Index, err)
	}
	if err := sm.Alarms.Load(kv); err != nil {
		return fmt.Errorf("reload alarms from snapshot at index %d: %w", meta.Index, err)
	}
	sm.AlarmsChanged(sm.Alarms.Get(pb.AlarmType_NONE))
	sm.PeersChanged()
	return nil
}
