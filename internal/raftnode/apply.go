package raftnode

import (
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
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
	// snapshotIndex is the index of the newest snapshot taken or received,
	// snapshotConf its configuration; snapshotFull says whether its file
	// holds (or is being written with) a full image rather than the
	// in-place marker.
	snapshotIndex uint64
	snapshotConf  raftpb.ConfState
	snapshotFull  bool
	// loggedBytes is the size of the entries applied since the newest
	// snapshot was taken or received (see maybeSnapshot).
	loggedBytes uint64
	// wantFull is set when raft needs a full snapshot to send a follower
	// and the newest one is in place or of an older configuration; the
	// next snapshot is then full.
	wantFull bool
}

// runApply is the apply loop. It stops between batches, so Stop lets the
// batch in progress finish. Between batches it gives the state machine's
// IdleWorker one step at a time, as long as it has work left (a select
// between a ready batch and a step picks either: both are bounded).
func (n *Node) runApply() {
	defer n.loops.Done()
	worker, _ := n.sm.(IdleWorker)
	always := make(chan struct{})
	close(always)
	idle := worker != nil // a restarted state machine may have work left
	for {
		var idleReady <-chan struct{}
		if idle {
			idleReady = always
		}
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
			idle = worker != nil
		case <-n.fullSnapshotWanted:
			if err := n.wantFullSnapshot(); err != nil {
				n.fail(err)
				return
			}
		case <-n.snapshotDone:
			if err := n.maybeSnapshot(); err != nil {
				n.fail(err)
				return
			}
		case <-idleReady:
			more, err := worker.IdleWork()
			if err != nil {
				n.fail(fmt.Errorf("raftnode: state machine's idle work: %w", err))
				return
			}
			idle = more
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
	// A conf change is applied on its own: the entries before it first, so
	// that the state machine validates it against the state they produced;
	// then the change to raft's configuration (or the no-op of a veto);
	// then the entry, with the configuration it left.
	start := 0
	for i := range ents {
		if ents[i].Index <= st.processed {
			start = i + 1
			continue
		}
		if isConfChange(ents[i].Type) {
			if err := n.deliver(ents[start:i]); err != nil {
				return err
			}
			if err := n.applyConfChange(&ents[i]); err != nil {
				return err
			}
			if err := n.deliver(ents[i : i+1]); err != nil {
				return err
			}
			start = i + 1
		}
	}
	if err := n.deliver(ents[start:]); err != nil {
		return err
	}
	n.appliedIndex.Store(st.applied)
	n.appliedWaits.advance(st.applied)
	n.metrics.proposalsApplied.Set(float64(st.applied))
	return n.maybeSnapshot()
}

// deliver passes ents to the state machine, minus those it already holds.
// Its error is the state machine's, which stops the node (runApply): this
// is the one place a failed Apply is handled.
func (n *Node) deliver(ents []raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	st := &n.apply
	st.processed = ents[len(ents)-1].Index
	skip := 0
	for skip < len(ents) && ents[skip].Index <= st.applied {
		skip++
	}
	ents = ents[skip:]
	if len(ents) == 0 {
		return nil
	}
	if err := n.sm.Apply(ents); err != nil {
		return fmt.Errorf("raftnode: state machine failed to apply entries %d-%d: %w", ents[0].Index, ents[len(ents)-1].Index, err)
	}
	last := ents[len(ents)-1]
	st.applied, st.appliedTerm = last.Index, last.Term
	st.loggedBytes += entriesBytes(ents)
	n.unsnapshottedBytes.Store(st.loggedBytes)
	return nil
}

// applyConfChange applies the conf change entry e to raft's configuration,
// unless the state machine vetoes it (ConfChangeValidator).
func (n *Node) applyConfChange(e *raftpb.Entry) error {
	var cc raftpb.ConfChangeI
	switch e.Type {
	case raftpb.EntryConfChange:
		var c raftpb.ConfChange
		if err := c.Unmarshal(e.Data); err != nil {
			return fmt.Errorf("raftnode: decode conf change at %d: %w", e.Index, err)
		}
		cc = c
	default:
		var c raftpb.ConfChangeV2
		if err := c.Unmarshal(e.Data); err != nil {
			return fmt.Errorf("raftnode: decode conf change at %d: %w", e.Index, err)
		}
		cc = c
	}
	vetoed := false
	if v, ok := n.sm.(ConfChangeValidator); ok {
		if err := v.ValidateConfChange(e.Index, cc); err != nil {
			n.logger.Warn("state machine vetoed conf change; raft's configuration stays as it is",
				"index", e.Index, "reason", err)
			cc, vetoed = vetoedConfChange(cc), true
		}
	}
	var cs *raftpb.ConfState
	n.raft.with(func(rn *raft.RawNode) { cs = rn.ApplyConfChange(cc) })
	n.apply.confState = *cs
	n.publishConfState(*cs)
	if !vetoed {
		n.logger.Info("applied conf change", "index", e.Index, "voters", cs.Voters, "learners", cs.Learners)
	}
	return nil
}

// vetoedConfChange is what raft applies in place of a vetoed change: a
// change of node raft.None, which raft's configuration changer skips, so
// the entry counts as applied while the configuration stays as it was
// (etcd sets cc.NodeID = raft.None the same way). A ConfChangeV2 is
// replaced whole by such a V1 change: its transition, kept with no-op
// changes, could still enter or leave a joint configuration.
func vetoedConfChange(cc raftpb.ConfChangeI) raftpb.ConfChange {
	v1, _ := cc.AsV1()
	return raftpb.ConfChange{Type: v1.Type, NodeID: raft.None}
}

// applySnapshot restores the state machine from a snapshot the leader sent,
// whose file the raft loop already verified and recorded.
func (n *Node) applySnapshot(meta raftpb.SnapshotMetadata) error {
	st := &n.apply
	if meta.Index <= st.processed {
		return fmt.Errorf("raftnode: snapshot %d from the leader is not newer than processed entry %d", meta.Index, st.processed)
	}
	n.metrics.snapshotApplying.Set(1)
	err := n.restoreFromFile(meta)
	n.metrics.snapshotApplying.Set(0)
	if err != nil {
		return err
	}
	st.processed, st.applied, st.appliedTerm = meta.Index, meta.Index, meta.Term
	st.confState = meta.ConfState
	st.snapshotIndex, st.snapshotConf, st.snapshotFull = meta.Index, meta.ConfState, true
	st.loggedBytes = 0
	n.unsnapshottedBytes.Store(0)
	n.publishConfState(meta.ConfState)
	return nil
}
