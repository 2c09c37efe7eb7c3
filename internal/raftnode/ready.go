package raftnode

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/raftnode/wal"
)

// toApply is one Ready's worth of work for the apply loop.
type toApply struct {
	// snapshot, when set, is a snapshot received from the leader: the
	// state machine is restored from its file before entries are applied.
	snapshot *raftpb.SnapshotMetadata
	entries  []raftpb.Entry
	// applied, when set, is closed once the batch is applied (a follower
	// waits for its conf changes before sending further messages).
	applied chan struct{}
}

// errStopping ends the raft loop when Stop interrupts a Ready half-way.
var errStopping = errors.New("stopping")

// runRaft is the raft loop: it ticks raft and processes each Ready in the
// order raft requires (see handleReady). After an Advance it looks for the
// next Ready at once: on a single member the Advance that reports an entry
// durable is what commits it, so the entry is applied without a wake-up.
func (n *Node) runRaft() {
	defer n.loops.Done()
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	isLeader := false
	for {
		// Ticks are taken between Readys too: under a steady load raft
		// always has one, and a leader that stopped ticking would stop
		// sending heartbeats.
		select {
		case <-n.stopping:
			return
		case <-ticker.C:
			n.raft.tick()
		default:
		}
		if rd, ok := n.raft.ready(); ok {
			if err := n.handleReady(rd, &isLeader); err != nil {
				if !errors.Is(err, errStopping) {
					n.fail(err)
				}
				return
			}
			continue
		}
		select {
		case <-ticker.C:
			n.raft.tick()
		case <-n.raft.wake:
		case <-n.stopping:
			return
		}
	}
}

// handleReady processes one Ready:
//
//  1. publish soft state (leader changes) and read states;
//  2. as leader, send messages right away: the leader writes its log in
//     parallel with the followers writing theirs (raft thesis 10.2.1);
//  3. persist: a received snapshot's marker, entries and hard state go to
//     the WAL with one fsync, then into raft's MemoryStorage;
//  4. Advance: raft counts the entries durable (a single member commits
//     them now) and the committed ones applied. That comes before the
//     apply loop gets them, so that whoever sees an entry applied finds
//     raft agreeing: a conf change proposed right after the previous one
//     was applied is not refused as if one were still pending. (A
//     follower with a committed conf change advances only once it is
//     applied, step 5);
//  5. hand committed entries (and the snapshot) to the apply loop, which
//     applies them while this loop persists the next Ready;
//  6. as follower or candidate, send messages now that their preconditions
//     are durable, after waiting for a conf change to be applied.
func (n *Node) handleReady(rd raft.Ready, isLeader *bool) error {
	if !raft.IsEmptyHardState(rd.HardState) {
		n.term.Store(rd.HardState.Term)
		n.commitIndex.Store(rd.HardState.Commit)
		n.metrics.proposalsCommitted.Set(float64(rd.HardState.Commit))
	}
	if rd.SoftState != nil {
		n.updateLeader(rd.SoftState)
		*isLeader = rd.SoftState.RaftState == raft.StateLeader
	}
	for _, rs := range rd.ReadStates {
		select {
		case n.readStates <- rs:
		default:
			// The read loop is far behind; the round re-asks on its retry.
			n.logger.Warn("dropping read state, read loop is not keeping up", "index", rs.Index)
		}
	}
	if *isLeader {
		n.send(rd.Messages)
		if len(rd.Messages) > 0 && len(rd.Entries) > 0 {
			// Let the peers' stream writers, just woken, write the
			// appends before this goroutine blocks in the fsync: the
			// runtime queues a woken goroutine behind its waker on the
			// same P, and a P blocked in a system call is handed on only
			// after sysmon notices (tens to hundreds of µs), so the
			// appends would otherwise leave with the leader's fsync half
			// done (docs/performance.md, "One writer").
			runtime.Gosched()
		}
	}
	if err := n.persist(rd); err != nil {
		return err
	}
	// A follower must not vote or answer under a configuration it has
	// not applied yet (etcd waits the same way); nor may raft count a
	// conf change applied before it is (it would campaign under the old
	// configuration), so such a Ready is advanced only after the wait.
	waitApplied := !*isLeader && hasConfChange(rd.CommittedEntries)
	if !waitApplied {
		n.raft.advance(rd)
	}
	if len(rd.CommittedEntries) > 0 || !raft.IsEmptySnap(rd.Snapshot) {
		ap := toApply{entries: rd.CommittedEntries}
		if !raft.IsEmptySnap(rd.Snapshot) {
			meta := rd.Snapshot.Metadata
			ap.snapshot = &meta
		}
		if waitApplied {
			ap.applied = make(chan struct{})
		}
		select {
		case n.applyc <- ap:
		case <-n.stopping:
			return errStopping
		}
		if waitApplied {
			select {
			case <-ap.applied:
			case <-n.stopping:
				return errStopping
			}
			n.raft.advance(rd)
		}
	}
	if !*isLeader {
		n.send(rd.Messages)
	}
	return nil
}

// persist makes a Ready's snapshot, entries and hard state durable and
// visible to raft through MemoryStorage.
func (n *Node) persist(rd raft.Ready) error {
	if raft.IsEmptySnap(rd.Snapshot) {
		if err := n.wal.Save(rd.HardState, rd.Entries); err != nil {
			return fmt.Errorf("raftnode: persist Ready: %w", err)
		}
	} else {
		meta := rd.Snapshot.Metadata
		// The transport stored the image before stepping the MsgSnap; the
		// WAL marker must never point at a file that is not there.
		ref := raftsnap.Ref{Term: meta.Term, Index: meta.Index}
		_, inEngine, err := n.inspectSnapshot(ref)
		if err != nil {
			return fmt.Errorf("raftnode: snapshot %d from the leader has no valid file: %w", meta.Index, err)
		}
		if inEngine {
			// raftStorage keeps a leader from sending these.
			return fmt.Errorf("raftnode: snapshot %d from the leader holds no image, only the in-place marker", meta.Index)
		}
		if err := n.wal.SaveInstall(wal.Snapshot{Index: meta.Index, Term: meta.Term}, rd.HardState, rd.Entries); err != nil {
			return fmt.Errorf("raftnode: persist Ready with snapshot %d: %w", meta.Index, err)
		}
		n.noteFullSnapshot(meta.Index)
		if err := n.applySnapshotToLog(rd.Snapshot); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
			return fmt.Errorf("raftnode: apply snapshot %d to raft storage: %w", meta.Index, err)
		}
		if err := n.wal.ReleaseTo(meta.Index); err != nil {
			return fmt.Errorf("raftnode: release WAL after snapshot %d: %w", meta.Index, err)
		}
		n.logger.Info("installed snapshot from leader", "index", meta.Index, "term", meta.Term)
	}
	if err := n.appendToLog(rd.Entries); err != nil {
		return fmt.Errorf("raftnode: append %d entries to raft storage: %w", len(rd.Entries), err)
	}
	return nil
}

func (n *Node) send(msgs []raftpb.Message) {
	if len(msgs) == 0 || n.transport == nil {
		return
	}
	for i := range msgs {
		if msgs[i].Type == raftpb.MsgHeartbeat && !n.heartbeats.onTime(msgs[i].To, time.Now()) {
			n.metrics.heartbeatSendFailures.Inc()
			n.logger.Warn("leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk",
				"to", fmt.Sprintf("%x", msgs[i].To), "heartbeat-interval", n.heartbeats.interval/2)
		}
	}
	n.transport.Send(msgs)
}

func (n *Node) updateLeader(ss *raft.SoftState) {
	if ss.RaftState == raft.StateLeader {
		n.metrics.isLeader.Set(1)
		n.heartbeats.reset()
	} else {
		n.metrics.isLeader.Set(0)
	}
	old := n.lead.Swap(ss.Lead)
	if old == ss.Lead {
		return
	}
	term := n.term.Load()
	if ss.Lead == raft.None {
		n.metrics.hasLeader.Set(0)
		n.logger.Info("leader lost", "previous", fmt.Sprintf("%x", old), "term", term)
	} else {
		n.metrics.hasLeader.Set(1)
		n.metrics.leaderChanges.Inc()
		n.logger.Info("leader changed", "leader", fmt.Sprintf("%x", ss.Lead), "previous", fmt.Sprintf("%x", old), "term", term)
	}
	n.leaderChanged.notify()
	if n.cfg.OnLeaderChange != nil {
		n.cfg.OnLeaderChange(ss.Lead, term)
	}
}

func hasConfChange(ents []raftpb.Entry) bool {
	for i := range ents {
		if isConfChange(ents[i].Type) {
			return true
		}
	}
	return false
}

func isConfChange(t raftpb.EntryType) bool {
	return t == raftpb.EntryConfChange || t == raftpb.EntryConfChangeV2
}
