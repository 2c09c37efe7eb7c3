package raftnode

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/raftnode/wal"
)

// PersistentImage is an Image of a state machine whose storage engine
// keeps the state on disk by itself (the RocksDB engine). For such a state
// machine a routine snapshot needs no copy of the state: raftnode calls
// Persist instead of WriteTo and writes a snapshot file that holds only a
// marker (see doc.go, "Snapshots persisted in place").
type PersistentImage interface {
	Image
	// PersistsInPlace reports whether Persist can stand in for WriteTo.
	// False (an engine that keeps its state in memory only) makes raftnode
	// write the image out as for any Image.
	PersistsInPlace() bool
	// Persist makes the engine hold, durably across power loss, at least
	// the state the image captures. It runs in the snapshot goroutine,
	// concurrently with later Applies.
	Persist() error
}

// inPlaceMarker is the whole image of a snapshot file whose state is kept
// in the state machine's engine. No state machine image is exactly these
// bytes: every engine's image starts with its own magic.
const inPlaceMarker = "MSRAFT-STATE-IN-ENGINE\x00\x01"

// markerImage writes inPlaceMarker.
type markerImage struct{}

func (markerImage) WriteTo(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, inPlaceMarker)
	return int64(n), err
}

// inPlace returns img as a PersistentImage if its engine can persist it
// where it is.
func inPlace(img Image) (PersistentImage, bool) {
	p, ok := img.(PersistentImage)
	if !ok || !p.PersistsInPlace() {
		return nil, false
	}
	return p, true
}

// inspectSnapshot validates the file for ref (like raftsnap.Store.Load) and
// reports whether it holds only the in-place marker. Reading a full image
// stops at its size, so this costs one validation pass like Load.
func (n *Node) inspectSnapshot(ref raftsnap.Ref) (meta raftpb.SnapshotMetadata, inEngine bool, err error) {
	img, err := n.snaps.OpenImage(ref)
	if err != nil {
		return meta, false, err
	}
	meta = img.Metadata
	if img.Size == int64(len(inPlaceMarker)) {
		var data []byte
		// Reading to the end re-checks the checksum.
		data, err = io.ReadAll(img)
		inEngine = err == nil && string(data) == inPlaceMarker
	}
	if cerr := img.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return meta, false, fmt.Errorf("read snapshot %s: %w", n.snaps.Path(ref), err)
	}
	return meta, inEngine, nil
}

// noteFullSnapshot records that the file of the snapshot at index holds a
// full image, which the transport may stream to a follower. The index
// only grows: a full image older than the newest one is never needed.
func (n *Node) noteFullSnapshot(index uint64) {
	for old := n.fullSnapshotIndex.Load(); index > old; old = n.fullSnapshotIndex.Load() {
		if n.fullSnapshotIndex.CompareAndSwap(old, index) {
			return
		}
	}
}

// raftStorage is what raft reads its log from: raft.MemoryStorage, except
// that Snapshot only hands raft a snapshot it can usefully send. raft asks
// for a snapshot only to send it to a follower whose entries the log no
// longer has, and the transport streams the snapshot's file. So Snapshot
// refuses
//
//   - a snapshot whose file holds only the in-place marker, and
//   - one taken under an older configuration than the applied one: a
//     member added since is not in its ConfState, and raft on that member
//     ignores such a snapshot ("not in the ConfState"), so the leader
//     would resend it forever while the new member never catches up;
//
// it then asks the apply loop for a full snapshot of the current state
// and answers ErrSnapshotTemporarilyUnavailable, which makes raft retry
// on a later heartbeat response, by when the new snapshot has replaced
// the old one in MemoryStorage.
type raftStorage struct {
	*raft.MemoryStorage
	n *Node
}

func (s raftStorage) Snapshot() (raftpb.Snapshot, error) {
	snap, err := s.MemoryStorage.Snapshot()
	if err != nil || raft.IsEmptySnap(snap) {
		return snap, err
	}
	current := s.n.confState.Load()
	if snap.Metadata.Index == s.n.fullSnapshotIndex.Load() && (current == nil || sameConfState(snap.Metadata.ConfState, *current)) {
		return snap, nil
	}
	select {
	case s.n.fullSnapshotWanted <- struct{}{}:
	default: // a request is already pending
	}
	return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
}

// sameConfState reports whether a and b are the same configuration
// (raftpb.ConfState.Equivalent without its error formatting).
func sameConfState(a, b raftpb.ConfState) bool {
	sameSet := func(x, y []uint64) bool {
		return len(x) == len(y) && slices.Equal(slices.Sorted(slices.Values(x)), slices.Sorted(slices.Values(y)))
	}
	return a.AutoLeave == b.AutoLeave && sameSet(a.Voters, b.Voters) && sameSet(a.Learners, b.Learners) &&
		sameSet(a.VotersOutgoing, b.VotersOutgoing) && sameSet(a.LearnersNext, b.LearnersNext)
}

// wantFullSnapshot handles raft's request for a snapshot it can send: the
// apply loop takes a full one as soon as it may, unless the newest
// snapshot already is (or is being written as) a full image of the
// current configuration.
func (n *Node) wantFullSnapshot() error {
	st := &n.apply
	if st.snapshotFull && sameConfState(st.snapshotConf, st.confState) {
		return nil
	}
	st.wantFull = true
	return n.maybeSnapshot()
}

// fullImageLogFraction: a full-image snapshot waits until the log since
// the last one holds at least 1/fullImageLogFraction of that image's size
// (see maybeSnapshot).
const fullImageLogFraction = 4

// maybeSnapshot starts a snapshot once SnapshotCount entries were applied
// since the last one (and, for a full image, enough bytes; see below), or
// when raft needs a full image to send. The image
// is taken here, between two Applies; persisting it and compacting behind
// it happen in the background while applying goes on. One snapshot is in
// flight at a time; one due meanwhile is taken when it finishes
// (snapshotFinished wakes the apply loop), not only at the next apply.
func (n *Node) maybeSnapshot() error {
	st := &n.apply
	// A snapshot is due every SnapshotCount entries (etcd's rule), and,
	// when it means writing a full image (an engine that cannot persist
	// in place, like the memory engine), only once the log since the
	// last one holds 1/fullImageLogFraction of that image's size. Writing
	// a large store's whole image every SnapshotCount small entries
	// would cost far more than the entries themselves (hundreds of MB
	// every few seconds under a put load); this way images cost at most
	// fullImageLogFraction bytes per byte logged, and the log kept in
	// memory and replayed on restart stays below a fraction of the
	// image. A small store's image is small, so it still snapshots at
	// every SnapshotCount entries.
	// Entries holding MaxLogBytes/2 are due a snapshot whatever their
	// count, so that the in-memory log stays within its byte budget
	// (logbudget.go).
	due := n.snapshotDue(st.applied-st.snapshotIndex, st.loggedBytes)
	if st.processed < st.applied || st.applied == 0 || !(due || st.wantFull) || n.snapshotting.Load() {
		// (processed < applied: raft is still redelivering entries the
		// state machine holds, so confState is not yet that of applied.)
		return nil
	}
	img, err := n.sm.Snapshot()
	if err != nil {
		return fmt.Errorf("raftnode: state machine snapshot at %d: %w", st.applied, err)
	}
	persistent, inEngine := inPlace(img)
	if st.wantFull {
		inEngine = false
	}
	meta := raftpb.SnapshotMetadata{Index: st.applied, Term: st.appliedTerm, ConfState: st.confState}
	st.snapshotIndex, st.snapshotConf = st.applied, st.confState
	st.snapshotFull = !inEngine
	st.loggedBytes = 0
	st.wantFull = false
	// In flight before the bytes are cleared: whoever reads the bytes
	// cleared finds this snapshot in flight (or finished).
	n.snapshotting.Store(true)
	n.unsnapshottedBytes.Store(0)
	n.snapshotWG.Add(1)
	if inEngine {
		go n.persistSnapshot(meta, img, persistent)
	} else {
		go n.persistSnapshot(meta, img, nil)
	}
	return nil
}

// snapshotFinished ends the snapshot in flight and wakes the apply loop:
// the entries it applied meanwhile may be due the next one, and a member
// refusing proposals as Overloaded applies nothing more that would start
// it.
func (n *Node) snapshotFinished() {
	n.snapshotting.Store(false)
	select {
	case n.snapshotDone <- struct{}{}:
	default: // the apply loop has a wake-up pending already
	}
}

// snapshotDue reports whether entries entries holding logged bytes,
// applied since the newest snapshot, make the next one due (the rules are
// maybeSnapshot's).
func (n *Node) snapshotDue(entries, logged uint64) bool {
	return (entries > n.cfg.SnapshotCount || logged >= n.cfg.MaxLogBytes/2) &&
		logged*fullImageLogFraction >= n.fullImageBytes.Load()
}

// persistSnapshot makes the snapshot durable (writing the image to its
// file, or, for persistent, letting the engine persist it and writing a
// marker file), records it in the WAL, then lets raft's in-memory log and
// the WAL drop what it covers. The order matters: a WAL marker is written
// only for a durable snapshot, and nothing is released before the marker
// is durable.
func (n *Node) persistSnapshot(meta raftpb.SnapshotMetadata, img Image, persistent PersistentImage) {
	defer n.snapshotWG.Done()
	defer n.snapshotFinished()
	defer img.Release()
	start := time.Now()
	var (
		st  raftsnap.SaveStats
		err error
	)
	if persistent != nil {
		if err := persistent.Persist(); err != nil {
			n.fail(fmt.Errorf("raftnode: persist snapshot %d in the state machine's engine: %w", meta.Index, err))
			return
		}
		st, err = n.snaps.SaveTimed(meta, markerImage{})
	} else {
		st, err = n.snaps.SaveTimed(meta, img)
	}
	size := st.Bytes
	if err != nil {
		n.fail(fmt.Errorf("raftnode: save snapshot %d: %w", meta.Index, err))
		return
	}
	if persistent == nil {
		n.noteFullSnapshot(meta.Index)
		if _, canPersist := inPlace(img); !canPersist {
			n.fullImageBytes.Store(uint64(size))
		}
	}
	if err := n.wal.SaveSnapshot(wal.Snapshot{Index: meta.Index, Term: meta.Term}); err != nil {
		n.fail(fmt.Errorf("raftnode: record snapshot %d in WAL: %w", meta.Index, err))
		return
	}
	// Raft snapshots carry no data: the image is the file, which the
	// transport streams when raft sends this snapshot to a follower.
	if _, err := n.storage.CreateSnapshot(meta.Index, &meta.ConfState, nil); err != nil {
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			// A newer snapshot from the leader was installed meanwhile,
			// or this full image replaced the in-place marker of the
			// snapshot at the same index.
			return
		}
		n.fail(fmt.Errorf("raftnode: create raft snapshot %d: %w", meta.Index, err))
		return
	}
	// Keep SnapshotCatchUpEntries entries, holding at most MaxLogBytes/2,
	// before the snapshot so that a follower slightly behind catches up
	// from the log, not a snapshot (logbudget.go).
	compactTo, err := n.catchUpCompactIndex(meta.Index)
	if err != nil {
		n.fail(fmt.Errorf("raftnode: compact raft log behind snapshot %d: %w", meta.Index, err))
		return
	}
	if compactTo > 0 {
		if err := n.compactLog(compactTo); err != nil && !errors.Is(err, raft.ErrCompacted) {
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
	n.metrics.snapshotWriteSeconds.Observe(st.Write.Seconds())
	n.metrics.snapshotFsyncSeconds.Observe(st.Fsync.Seconds())
	n.logger.Info("saved snapshot", "index", meta.Index, "term", meta.Term, "in_engine", persistent != nil,
		"file", n.snaps.Path(raftsnap.Ref{Term: meta.Term, Index: meta.Index}), "bytes", size, "took", took)
}
