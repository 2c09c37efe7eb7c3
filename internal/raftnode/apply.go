package raftnode

import (
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/snapfile"
	"github.com/metastore-io/metastore/internal/wal"
)

// applyState is owned by the apply loop (and set by bootstrap before it
// starts).
type applyState struct {
	// processed is the last entry handed through the loop, including
	// entries skipped because the state machine already held them: raft
	// redelivers from the snapshot on restart so that it sees every conf
	// change again.
	processed uint64
	// applied is the state machine's applied index, appliedTerm its term.
	applied     uint64
	appliedTerm uint64
	// confState is the configuration as of processed.
	confState raftpb.ConfState
	// snapshotIndex is the index of the newest snapshot taken or received.
	snapshotIndex uint64
}

// runApply is the apply loop. It stops between batches, so Stop lets the
// batch in progress finish.
func (n *Node) runApply() {
	defer n.loops.Done()
	for {
		select {
		case ap := <-n.applyc:
			err := n.applyBatch(ap)
			if ap.applied != nil {
				close(ap.applied)
			}
			if err != nil {
				n.fail(err)
				return
			}
		case <-n.stopping:
			return
		}
	}
}

func (n *Node) applyBatch(ap toApply) error {
	st := &n.apply
	if ap.snapshot != nil {
		if err := n.applySnapshot(*ap.snapshot); err != nil {
			return err
		}
	}
	ents := ap.entries
	if len(ents) > 0 && ents[0].Index > st.processed+1 {
		return fmt.Errorf("raftnode: committed entry %d follows processed entry %d: entries missing", ents[0].Index, st.processed)
	}
	// Split the batch after each conf change so that every Apply call
	// sees the configuration its last entry produced.
	start := 0
	for i := range ents {
		if ents[i].Index <= st.processed {
			start = i + 1
			continue
		}
		if isConfChange(ents[i].Type) {
			cs, err := n.applyConfChange(&ents[i])
			if err != nil {
				return err
			}
			n.deliver(ents[start:i+1], cs)
			start = i + 1
		}
	}
	n.deliver(ents[start:], nil)
	n.appliedIndex.Store(st.applied)
	n.appliedWaits.advance(st.applied)
	n.metrics.proposalsApplied.Set(float64(st.applied))
	return n.maybeSnapshot()
}

// deliver passes ents to the state machine, minus those it already holds.
func (n *Node) deliver(ents []raftpb.Entry, cs *raftpb.ConfState) {
	if len(ents) == 0 {
		return
	}
	st := &n.apply
	st.processed = ents[len(ents)-1].Index
	skip := 0
	for skip < len(ents) && ents[skip].Index <= st.applied {
		skip++
	}
	ents = ents[skip:]
	if len(ents) == 0 {
		return // cs, if any, belongs to an entry the state machine holds
	}
	n.sm.Apply(ents, cs)
	last := ents[len(ents)-1]
	st.applied, st.appliedTerm = last.Index, last.Term
}

func (n *Node) applyConfChange(e *raftpb.Entry) (*raftpb.ConfState, error) {
	var cc raftpb.ConfChangeI
	switch e.Type {
	case raftpb.EntryConfChange:
		var c raftpb.ConfChange
		if err := c.Unmarshal(e.Data); err != nil {
			return nil, fmt.Errorf("raftnode: decode conf change at %d: %w", e.Index, err)
		}
		cc = c
	default:
		var c raftpb.ConfChangeV2
		if err := c.Unmarshal(e.Data); err != nil {
			return nil, fmt.Errorf("raftnode: decode conf change at %d: %w", e.Index, err)
		}
		cc = c
	}
	cs := n.raft.ApplyConfChange(cc)
	n.apply.confState = *cs
	n.publishConfState(*cs)
	n.logger.Info("applied conf change", "index", e.Index, "voters", cs.Voters, "learners", cs.Learners)
	return cs, nil
}

// applySnapshot restores the state machine from a snapshot the leader sent,
// whose file the raft loop already verified and recorded.
func (n *Node) applySnapshot(meta raftpb.SnapshotMetadata) error {
	st := &n.apply
	if meta.Index <= st.processed {
		return fmt.Errorf("raftnode: snapshot %d from the leader is not newer than processed entry %d", meta.Index, st.processed)
	}
	if err := n.restoreFromFile(meta); err != nil {
		return err
	}
	st.processed, st.applied, st.appliedTerm = meta.Index, meta.Index, meta.Term
	st.confState = meta.ConfState
	st.snapshotIndex = meta.Index
	n.publishConfState(meta.ConfState)
	return nil
}

// maybeSnapshot starts a snapshot once SnapshotCount entries were applied
// since the last one. The image is taken here, between two Applies; writing
// it out and compacting behind it happen in the background while applying
// goes on. One snapshot is in flight at a time.
func (n *Node) maybeSnapshot() error {
	st := &n.apply
	if st.processed < st.applied || st.applied-st.snapshotIndex <= n.cfg.SnapshotCount || n.snapshotting.Load() {
		// (processed < applied: raft is still redelivering entries the
		// state machine holds, so confState is not yet that of applied.)
		return nil
	}
	img, err := n.sm.Snapshot()
	if err != nil {
		return fmt.Errorf("raftnode: state machine snapshot at %d: %w", st.applied, err)
	}
	meta := raftpb.SnapshotMetadata{Index: st.applied, Term: st.appliedTerm, ConfState: st.confState}
	st.snapshotIndex = st.applied
	n.snapshotting.Store(true)
	n.snapshotWG.Add(1)
	go n.persistSnapshot(meta, img)
	return nil
}

// persistSnapshot writes the snapshot file, records it in the WAL, then
// lets raft's in-memory log and the WAL drop what it covers. The order
// matters: a WAL marker is written only for a durable file, and nothing is
// released before the marker is durable.
func (n *Node) persistSnapshot(meta raftpb.SnapshotMetadata, img Image) {
	defer n.snapshotWG.Done()
	defer n.snapshotting.Store(false)
	defer img.Release()
	start := time.Now()
	size, err := n.snaps.Save(meta, img)
	if err != nil {
		n.fail(fmt.Errorf("raftnode: save snapshot %d: %w", meta.Index, err))
		return
	}
	if err := n.wal.SaveSnapshot(wal.Snapshot{Index: meta.Index, Term: meta.Term}); err != nil {
		n.fail(fmt.Errorf("raftnode: record snapshot %d in WAL: %w", meta.Index, err))
		return
	}
	// Raft snapshots carry no data: the image is the file, which the
	// transport streams when raft sends this snapshot to a follower.
	if _, err := n.storage.CreateSnapshot(meta.Index, &meta.ConfState, nil); err != nil {
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			return // a newer snapshot from the leader was installed meanwhile
		}
		n.fail(fmt.Errorf("raftnode: create raft snapshot %d: %w", meta.Index, err))
		return
	}
	// Keep SnapshotCatchUpEntries entries before the snapshot so that a
	// follower slightly behind catches up from the log, not a snapshot.
	if meta.Index > n.cfg.SnapshotCatchUpEntries {
		compactTo := meta.Index - n.cfg.SnapshotCatchUpEntries
		if err := n.storage.Compact(compactTo); err != nil && !errors.Is(err, raft.ErrCompacted) {
			n.fail(fmt.Errorf("raftnode: compact raft log to %d: %w", compactTo, err))
			return
		}
	}
	if err := n.wal.ReleaseTo(meta.Index); err != nil {
		n.fail(fmt.Errorf("raftnode: release WAL to %d: %w", meta.Index, err))
		return
	}
	took := time.Since(start)
	n.metrics.snapshotSaveSeconds.Observe(took.Seconds())
	n.logger.Info("saved snapshot", "index", meta.Index, "term", meta.Term,
		"file", n.snaps.Path(snapfile.Ref{Term: meta.Term, Index: meta.Index}), "bytes", size, "took", took)
}
