package raftnode

import (
	"errors"
	"fmt"
	"math"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// The in-memory log is bounded in bytes as well as in entries. etcd keeps
// every entry since the last snapshot (up to --snapshot-count, 10,000)
// plus --snapshot-catchup-entries (5,000) behind it in raft's
// MemoryStorage: for 1.5 MiB puts that is up to 22 GiB, and 30 s of such
// puts take etcd past 4 GiB resident. Here, with B = Config.MaxLogBytes:
//
//   - a snapshot is also due once the entries applied since the last one
//     hold B/2 bytes, whatever their count (maybeSnapshot). A state
//     machine that writes full images (the memory engine) still waits
//     until they hold a quarter of its last image, so that a large store
//     is not rewritten for every B/2 logged: its log is bounded by
//     max(B/2, image/4), a quarter of what the store already holds in
//     memory;
//   - the compaction behind a snapshot keeps at most B/2 bytes of entries
//     for followers that lag (catchUpCompactIndex), on top of the entry
//     count; a follower further behind is sent the snapshot;
//   - while the entries since the last snapshot hold four times that
//     bound (snapshots cannot keep up with the writes) Overloaded reports
//     it, and the server refuses new proposals with etcd's "too many
//     requests" until a snapshot catches up.
//
// So the log in memory holds about B (B/2 kept for followers, up to B/2
// since the snapshot), and never more than B/2 + 4·max(B/2, image/4) plus
// the entries of the snapshot being written: 2.5·B, or B/2 plus the size
// of the memory engine's image. logBytes is the exact byte
// count of the entries in MemoryStorage (their Data), kept by every
// change made to it through the methods below.

// appendToLog appends ents to the in-memory log and counts their bytes,
// uncounting the entries a conflicting append replaces.
func (n *Node) appendToLog(ents []raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	n.logMu.Lock()
	defer n.logMu.Unlock()
	first, err := n.storage.FirstIndex()
	if err != nil {
		return err
	}
	// MemoryStorage skips what is already compacted and replaces what
	// follows the first new entry.
	var replaced uint64
	if last, err := n.storage.LastIndex(); err == nil && ents[0].Index <= last {
		if replaced, err = n.logBytesIn(max(ents[0].Index, first), last); err != nil {
			return err
		}
	}
	if err := n.storage.Append(ents); err != nil {
		return err
	}
	if ents[0].Index < first {
		ents = ents[min(first-ents[0].Index, uint64(len(ents))):]
	}
	n.logBytes.Add(int64(entriesBytes(ents)) - int64(replaced))
	return nil
}

// applySnapshotToLog installs snap in the in-memory log, which drops every
// entry.
func (n *Node) applySnapshotToLog(snap raftpb.Snapshot) error {
	n.logMu.Lock()
	defer n.logMu.Unlock()
	if err := n.storage.ApplySnapshot(snap); err != nil {
		return err
	}
	n.logBytes.Store(0)
	return nil
}

// compactLog drops the in-memory entries up to and including index.
func (n *Node) compactLog(index uint64) error {
	n.logMu.Lock()
	defer n.logMu.Unlock()
	first, err := n.storage.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrCompacted
	}
	dropped, err := n.logBytesIn(first, index)
	if err != nil {
		return err
	}
	if err := n.storage.Compact(index); err != nil {
		return err
	}
	n.logBytes.Add(-int64(dropped))
	return nil
}

// logBytesIn sums the Data of the in-memory entries lo..hi (inclusive).
// The caller holds logMu.
func (n *Node) logBytesIn(lo, hi uint64) (uint64, error) {
	if hi < lo {
		return 0, nil
	}
	ents, err := n.storage.Entries(lo, hi+1, math.MaxUint64)
	if err != nil {
		return 0, fmt.Errorf("raftnode: entries %d-%d of the in-memory log: %w", lo, hi, err)
	}
	return entriesBytes(ents), nil
}

func entriesBytes(ents []raftpb.Entry) uint64 {
	var b uint64
	for i := range ents {
		b += uint64(len(ents[i].Data))
	}
	return b
}

// catchUpCompactIndex is the index to compact the in-memory log to behind
// a snapshot at index: SnapshotCatchUpEntries entries stay for followers
// that lag, and only as many of them as hold at most MaxLogBytes/2 bytes.
// 0 means nothing to compact.
func (n *Node) catchUpCompactIndex(index uint64) (uint64, error) {
	var compactTo uint64
	if index > n.cfg.SnapshotCatchUpEntries {
		compactTo = index - n.cfg.SnapshotCatchUpEntries
	}
	n.logMu.Lock()
	defer n.logMu.Unlock()
	first, err := n.storage.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := n.storage.LastIndex()
	if err != nil {
		return 0, err
	}
	lo := max(first, compactTo+1)
	hi := min(index, last)
	if lo > hi {
		return compactTo, nil
	}
	ents, err := n.storage.Entries(lo, hi+1, math.MaxUint64)
	if errors.Is(err, raft.ErrCompacted) {
		return compactTo, nil // a snapshot from the leader replaced the log
	}
	if err != nil {
		return 0, fmt.Errorf("raftnode: entries %d-%d of the in-memory log: %w", lo, hi, err)
	}
	// Keep the newest entries that fit in the catch-up budget.
	budget := n.cfg.MaxLogBytes / 2
	var kept uint64
	for i := len(ents) - 1; i >= 0; i-- {
		kept += uint64(len(ents[i].Data))
		if kept > budget {
			return ents[i].Index, nil
		}
	}
	return compactTo, nil
}

// LogBytes is the size of the entries in the in-memory log.
func (n *Node) LogBytes() uint64 { return uint64(max(n.logBytes.Load(), 0)) }

// Overloaded reports whether the entries applied since the last snapshot
// hold overloadFactor times what is due a snapshot (max(MaxLogBytes/2, a
// quarter of the last full image)): snapshots are not keeping up with
// the writes, and new proposals should wait (the server refuses them with
// etcd's "too many requests", before proposing).
func (n *Node) Overloaded() bool {
	due := max(n.cfg.MaxLogBytes/2, n.fullImageBytes.Load()/fullImageLogFraction)
	return n.unsnapshottedBytes.Load() >= overloadFactor*due
}

// overloadFactor: proposals are refused once the entries since the last
// snapshot hold four times what made it due: 2·MaxLogBytes, or as much as
// the memory engine's whole image. Twice was too tight for the memory
// engine: writing an image of 800 MiB took longer than logging another
// 200 MiB of 8 MiB puts, and the member refused writes while etcd took
// them (at 6.5 GiB resident).
const overloadFactor = 4
