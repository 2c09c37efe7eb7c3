package raftnode

import (
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/raftnode/wal"
)

// bootstrap opens the WAL and snapshot files (or creates them for a new
// member), restores the state machine and raft's in-memory log from them,
// and starts raft. It sets n.wal, n.snaps, n.raft and the apply state.
func (n *Node) bootstrap() error {
	snaps, err := raftsnap.Open(snapDir(n.cfg.DataDir), raftsnap.Options{Logger: n.logger, Keep: n.cfg.MaxSnapshotFiles, NoSync: n.cfg.UnsafeNoFsync})
	if err != nil {
		return fmt.Errorf("raftnode: %w", err)
	}
	n.snaps = snaps
	dir := walDirOf(n.cfg.DataDir, n.cfg.WALDir)
	exists, err := wal.Exists(dir)
	if err != nil {
		return fmt.Errorf("raftnode: %w", err)
	}
	if !exists {
		return n.bootstrapNew(dir)
	}
	w, rec, err := wal.Open(dir, n.walOptions())
	if err != nil {
		return fmt.Errorf("raftnode: open WAL: %w", err)
	}
	n.wal = w
	want := wal.Metadata{MemberID: n.cfg.ID, ClusterID: n.cfg.ClusterID}
	if rec.Metadata != want {
		return fmt.Errorf("raftnode: data dir %s belongs to member %x of cluster %x, not member %x of cluster %x",
			n.cfg.DataDir, rec.Metadata.MemberID, rec.Metadata.ClusterID, n.cfg.ID, n.cfg.ClusterID)
	}
	if raft.IsEmptyHardState(rec.HardState) && len(rec.Entries) == 0 && len(rec.Snapshots) == 0 {
		// Created, then stopped before raft persisted anything (not even
		// the bootstrap configuration): start as a new member again.
		if err := n.checkPristine(); err != nil {
			return err
		}
		return n.startNew()
	}
	return n.restart(rec)
}

func (n *Node) walOptions() wal.Options {
	syncFile := n.cfg.syncFile
	if syncFile == nil {
		syncFile = wal.SyncData
	}
	if n.cfg.UnsafeNoFsync {
		syncFile = func(*os.File) error { return nil }
	}
	return wal.Options{
		Logger:           n.logger,
		SegmentSizeBytes: n.cfg.WALSegmentSizeBytes,
		MaxFiles:         n.cfg.MaxWALFiles,
		Preallocate:      true,
		SyncFile: func(f *os.File) error {
			start := time.Now()
			err := syncFile(f)
			n.metrics.walFsyncSeconds.Observe(time.Since(start).Seconds())
			return err
		},
		OnWrite: func(bytes int, took time.Duration) {
			n.metrics.walWriteSeconds.Observe(took.Seconds())
			n.metrics.walWriteBytes.Add(float64(bytes))
		},
	}
}

func (n *Node) raftConfig() *raft.Config {
	return &raft.Config{
		ID:                        n.cfg.ID,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		Storage:                   raftStorage{MemoryStorage: n.storage, n: n},
		MaxSizePerMsg:             n.cfg.MaxSizePerMsg,
		MaxInflightMsgs:           n.cfg.MaxInflightMsgs,
		MaxUncommittedEntriesSize: n.cfg.MaxUncommittedEntriesSize,
		CheckQuorum:               true,
		PreVote:                   !n.cfg.DisablePreVote,
		Logger:                    raftLogger{l: n.logger},
	}
}

// bootstrapNew creates the WAL of a member whose data dir is new.
func (n *Node) bootstrapNew(dir string) error {
	if err := n.checkPristine(); err != nil {
		return err
	}
	w, err := wal.Create(dir, wal.Metadata{MemberID: n.cfg.ID, ClusterID: n.cfg.ClusterID}, n.walOptions())
	if err != nil {
		return fmt.Errorf("raftnode: create WAL: %w", err)
	}
	n.wal = w
	return n.startNew()
}

// checkPristine refuses to start a new log under state that claims to be
// further along: entries in the state machine or snapshot files would not
// match a log that starts from index 1.
func (n *Node) checkPristine() error {
	if applied := n.sm.AppliedIndex(); applied != 0 {
		return fmt.Errorf("raftnode: state machine holds entries up to %d but data dir %s has no raft log", applied, n.cfg.DataDir)
	}
	refs, err := n.snaps.List()
	if err != nil {
		return fmt.Errorf("raftnode: %w", err)
	}
	if len(refs) > 0 {
		return fmt.Errorf("raftnode: %s holds snapshot files but no raft log: refusing to guess which state is current", n.snaps.Dir())
	}
	return nil
}

// startNew starts raft on an empty log: with the bootstrap configuration as
// its first entries, or, when joining, empty until the leader sends a
// snapshot or the log.
func (n *Node) startNew() error {
	n.publishConfState(raftpb.ConfState{})
	rc := n.raftConfig()
	if n.cfg.Join {
		n.logger.Info("starting new member, joining an existing cluster")
		return n.startRaft(rc, nil)
	}
	n.logger.Info("starting new member, bootstrapping cluster", "peers", len(n.cfg.Peers))
	return n.startRaft(rc, n.cfg.Peers)
}

// startRaft creates raft's state machine; peers, when given, bootstrap a
// new cluster's configuration.
func (n *Node) startRaft(rc *raft.Config, peers []raft.Peer) error {
	r, err := newRawRaft(rc, peers)
	if err != nil {
		return fmt.Errorf("raftnode: start raft: %w", err)
	}
	n.raft = r
	return nil
}

// restart rebuilds raft's log from the newest snapshot and the WAL.
func (n *Node) restart(rec *wal.Recovered) error {
	snap, inEngine, err := n.newestSnapshot(rec)
	if err != nil {
		return err
	}
	ents, err := rec.EntriesAfter(snap.Index)
	if err != nil {
		return fmt.Errorf("raftnode: WAL does not continue snapshot %d: %w", snap.Index, err)
	}
	hs, lastIndex, err := n.recoverHardState(rec.HardState, snap, ents)
	if err != nil {
		return err
	}
	applied, err := n.catchUpStateMachine(snap, inEngine, lastIndex)
	if err != nil {
		return err
	}
	// Whatever the state machine applied was committed, even if the
	// commit index recording it was not synced.
	hs.Commit = max(hs.Commit, applied)
	if n.cfg.ForceNewCluster {
		if ents, hs, err = n.forceNewCluster(snap, ents, hs); err != nil {
			return err
		}
		if len(ents) > 0 {
			lastIndex = ents[len(ents)-1].Index
		}
	}
	appliedTerm, err := n.loadStorage(snap, hs, ents, applied)
	if err != nil {
		return err
	}

	// raft redelivers every committed entry after the snapshot; the apply
	// loop passes only those above the state machine's applied index to
	// Apply, but feeds every conf change among them back to raft, which
	// rebuilds its configuration from the snapshot's that way.
	n.apply = applyState{
		processed:     snap.Index,
		applied:       applied,
		appliedTerm:   appliedTerm,
		confState:     snap.ConfState,
		snapshotIndex: snap.Index,
		snapshotConf:  snap.ConfState,
		snapshotFull:  !inEngine,
	}
	if snap.Index > 0 && !inEngine {
		n.noteFullSnapshot(snap.Index)
	}
	n.publishConfState(snap.ConfState)
	n.appliedIndex.Store(applied)
	n.appliedWaits.advance(applied)
	n.commitIndex.Store(hs.Commit)
	n.term.Store(hs.Term)
	if o, ok := n.sm.(RecoveredCommitObserver); ok {
		o.RecoveredCommit(hs.Commit)
	}

	rc := n.raftConfig()
	rc.Applied = snap.Index
	n.logger.Info("restarting member",
		"snapshot_index", snap.Index, "applied_index", applied, "commit_index", hs.Commit,
		"last_index", lastIndex, "term", hs.Term, "wal_entries", len(ents))
	if err := n.startRaft(rc, nil); err != nil {
		return err
	}
	n.skipElectionWaitIfAlone(snap.ConfState)
	return nil
}

// recoverHardState is the hard state to restart raft with, given the
// WAL's, the snapshot and the entries after it, and the log's last index.
func (n *Node) recoverHardState(hs raftpb.HardState, snap raftpb.SnapshotMetadata, ents []raftpb.Entry) (raftpb.HardState, uint64, error) {
	lastIndex, lastTerm := snap.Index, snap.Term
	if len(ents) > 0 {
		lastIndex, lastTerm = ents[len(ents)-1].Index, ents[len(ents)-1].Term
	}
	// The snapshot holds committed state only; a commit index written
	// without fsync may have been lost behind it.
	hs.Commit = max(hs.Commit, snap.Index)
	// A Save writes entries before the hard state, so a torn write can keep
	// entries of a term whose hard state it lost. That hard state had no
	// vote (a vote is always synced in an earlier Ready, before any entry
	// of its term arrives), so restoring the term with no vote is exact and
	// keeps terms monotonic along the log.
	if hs.Term < lastTerm {
		n.logger.Warn("hard state older than the log's last term, raising it", "term", hs.Term, "log_term", lastTerm)
		hs.Term, hs.Vote = lastTerm, raft.None
	}
	if hs.Commit > lastIndex {
		return hs, 0, fmt.Errorf("raftnode: WAL hard state commits %d but the log ends at %d", hs.Commit, lastIndex)
	}
	return hs, lastIndex, nil
}

// catchUpStateMachine brings a state machine behind the snapshot up to it
// from the snapshot file and returns its applied index.
func (n *Node) catchUpStateMachine(snap raftpb.SnapshotMetadata, inEngine bool, lastIndex uint64) (uint64, error) {
	applied := n.sm.AppliedIndex()
	if snap.Index > 0 && applied < snap.Index {
		if inEngine {
			return 0, fmt.Errorf("raftnode: snapshot %d was persisted in the state machine's engine, which now holds entries only up to %d: "+
				"its data was lost or replaced (another --storage-engine?); refusing to start", snap.Index, applied)
		}
		if err := n.restoreFromFile(snap); err != nil {
			return 0, err
		}
		applied = snap.Index
	}
	if applied > lastIndex {
		return 0, fmt.Errorf("raftnode: state machine applied %d but the log ends at %d: WAL from another history?", applied, lastIndex)
	}
	return applied, nil
}

// loadStorage fills raft's in-memory storage with the snapshot, the hard
// state and the entries, and returns the term of the applied index.
func (n *Node) loadStorage(snap raftpb.SnapshotMetadata, hs raftpb.HardState, ents []raftpb.Entry, applied uint64) (uint64, error) {
	if snap.Index > 0 {
		if err := n.applySnapshotToLog(raftpb.Snapshot{Metadata: snap}); err != nil {
			return 0, fmt.Errorf("raftnode: load snapshot %d into raft storage: %w", snap.Index, err)
		}
	}
	if err := n.storage.SetHardState(hs); err != nil {
		return 0, fmt.Errorf("raftnode: load hard state: %w", err)
	}
	if err := n.appendToLog(ents); err != nil {
		return 0, fmt.Errorf("raftnode: load %d WAL entries: %w", len(ents), err)
	}
	appliedTerm, err := n.storage.Term(applied)
	if err != nil && applied > 0 {
		return 0, fmt.Errorf("raftnode: term of applied index %d: %w", applied, err)
	}
	return appliedTerm, nil
}

// skipElectionWaitIfAlone lets a member that is its configuration's only
// voter stand for election at once instead of after an election timeout
// (1 to 2 s with the defaults): nobody else can lead, so waiting would
// only delay the first request after a restart. raft declines to campaign
// while conf changes between its applied and commit index are pending;
// the election timer is then advanced to one tick short of its minimum,
// as etcd does. Either way elections stay as safe as ever: this only
// changes when the member stands. Without a snapshot the configuration is
// still in the log, and the bootstrap peers stand in for it.
func (n *Node) skipElectionWaitIfAlone(cs raftpb.ConfState) {
	if n.cfg.DisableElectionTickAdvance {
		return
	}
	voters := cs.Voters
	if len(voters) == 0 && len(cs.VotersOutgoing) == 0 {
		for _, p := range n.cfg.Peers {
			voters = append(voters, p.ID)
		}
	}
	if len(voters) != 1 || voters[0] != n.cfg.ID || len(cs.VotersOutgoing) > 0 {
		return
	}
	var err error
	n.raft.with(func(rn *raft.RawNode) {
		for range n.cfg.ElectionTicks - 1 {
			rn.Tick()
		}
		err = rn.Campaign()
	})
	if err != nil {
		n.logger.Warn("could not campaign at once after restart; waiting for the election timeout", "err", err)
	}
}

// newestSnapshot picks the snapshot to restart from: the newest one the WAL
// has a marker for. A marker is written only after its snapshot file is
// durable, so files newer than the newest marker are ones a crash left
// unfinished (or an install raft never recorded): they are removed. The
// chosen file must be intact: if it is not, restarting from an older one
// would silently roll the member back (the WAL before the newest snapshot
// is released), so Start refuses, naming the file. etcd 3.6 instead
// renames a damaged file to .broken and loads an older snapshot, which
// works there because it keeps more WAL behind its snapshots; an operator
// recovers a MetaStore member by replacing it (member remove, member add,
// empty data dir). inEngine reports
// a snapshot persisted in place (its file holds only the marker).
func (n *Node) newestSnapshot(rec *wal.Recovered) (meta raftpb.SnapshotMetadata, inEngine bool, err error) {
	var newest wal.Snapshot
	for _, s := range rec.Snapshots {
		if s.Index > newest.Index {
			newest = s
		}
	}
	refs, err := n.snaps.List()
	if err != nil {
		return meta, false, fmt.Errorf("raftnode: %w", err)
	}
	for _, ref := range refs {
		if ref.Index > newest.Index || (ref.Index == newest.Index && ref.Term != newest.Term) {
			n.logger.Warn("removing snapshot file the WAL never recorded", "file", n.snaps.Path(ref))
			if err := n.snaps.Remove(ref); err != nil {
				return meta, false, fmt.Errorf("raftnode: %w", err)
			}
		}
	}
	if newest.Index == 0 {
		return meta, false, nil
	}
	meta, inEngine, err = n.inspectSnapshot(raftsnap.Ref{Term: newest.Term, Index: newest.Index})
	if err != nil {
		return meta, false, fmt.Errorf("raftnode: newest snapshot (index %d, term %d) is unusable, refusing to start: %w", newest.Index, newest.Term, err)
	}
	return meta, inEngine, nil
}

// restoreFromFile replaces the state machine's state with a snapshot file.
func (n *Node) restoreFromFile(meta raftpb.SnapshotMetadata) error {
	start := time.Now()
	img, err := n.snaps.OpenImage(raftsnap.Ref{Term: meta.Term, Index: meta.Index})
	if err != nil {
		return fmt.Errorf("raftnode: open snapshot %d: %w", meta.Index, err)
	}
	restoreErr := n.sm.Restore(img, meta)
	if err := errors.Join(restoreErr, img.Close()); err != nil {
		return fmt.Errorf("raftnode: restore state machine from snapshot %d: %w", meta.Index, err)
	}
	n.logger.Info("restored state machine from snapshot",
		"index", meta.Index, "term", meta.Term, "bytes", img.Size, "took", time.Since(start))
	return nil
}

func (n *Node) publishConfState(cs raftpb.ConfState) {
	n.confState.Store(&cs)
}
