package raftnode

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"

	"github.com/metastore-io/metastore/test/raftkit"
)

// persistentSM is a fakeSM whose images persist in place, like a state
// machine on the RocksDB engine. Its state lives in the test process, so
// "the engine" survives a node restart as long as the test reuses it.
type persistentSM struct {
	*raftkit.StateMachine
	persists atomic.Int64
	// persistGate, if set, holds every Persist until it is closed, so
	// that a test can keep a snapshot in flight.
	persistGate chan struct{}
}

func newPersistentSM() *persistentSM { return &persistentSM{StateMachine: raftkit.New()} }

func (s *persistentSM) Snapshot() (Image, error) {
	img, err := s.StateMachine.Snapshot()
	return persistentImage{Image: img, sm: s}, err
}

type persistentImage struct {
	Image
	sm *persistentSM
}

func (persistentImage) PersistsInPlace() bool { return true }

func (i persistentImage) Persist() error {
	i.sm.persists.Add(1)
	if i.sm.persistGate != nil {
		<-i.sm.persistGate
	}
	return nil
}

// snapshotKinds returns how many of n's snapshot files hold the in-place
// marker and how many a full image.
func snapshotKinds(t *testing.T, n *Node) (markers, full int) {
	t.Helper()
	refs, err := n.Snapshots().List()
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		_, inEngine, err := n.inspectSnapshot(ref)
		if err != nil {
			t.Fatal(err)
		}
		if inEngine {
			markers++
		} else {
			full++
		}
	}
	return markers, full
}

func TestInPlaceSnapshotsWriteMarkersAndRestartWithoutRestore(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SnapshotCount = 40
	cfg.SnapshotCatchUpEntries = 10
	cfg.WALSegmentSizeBytes = 2048
	sm := newPersistentSM()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	for i, p := range raftkit.PayloadRange("s", 0, 300) {
		proposeAll(t, n, []string{p})
		sm.WaitPayloads(t, i+1)
	}
	n.Stop()

	markers, full := snapshotKinds(t, n)
	if markers == 0 || full != 0 {
		t.Fatalf("%d marker and %d full snapshot files, want only markers", markers, full)
	}
	if got := sm.persists.Load(); got < int64(markers) {
		t.Fatalf("state machine persisted %d times for %d in-place snapshots", got, markers)
	}
	if segs := walSegments(t, filepath.Join(dir, "wal")); segs[0] == "0000000000000000-0000000000000000.wal" {
		t.Fatalf("in-place snapshots released no WAL segment: %v", segs)
	}

	// The engine still holds everything: restart without any restore.
	n2 := mustStart(t, cfg, sm)
	waitLeader(t, n2)
	proposeAll(t, n2, []string{"tail"})
	sm.WaitPayloads(t, 301)
	sm.Check(t)
	restores := sm.Restores()
	if restores != 0 {
		t.Fatalf("state machine restored %d times; in-place snapshots have no image to restore", restores)
	}
	n2.Stop()

	// An engine that lost its data cannot fall back on an image.
	_, err := Start(cfg, newPersistentSM())
	if err == nil || !strings.Contains(err.Error(), "persisted in the state machine's engine") {
		t.Fatalf("Start with an empty engine behind an in-place snapshot: err = %v", err)
	}
}

func TestLaggingFollowerGetsFullImageFromInPlaceLeader(t *testing.T) {
	ids := []uint64{1, 2, 3}
	net := newMemNetwork(t, ids...)
	nodes := map[uint64]*Node{}
	sms := map[uint64]*persistentSM{}
	peers := []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	for _, id := range ids {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = id
		cfg.Peers = peers
		cfg.Transport = net.transport(id)
		cfg.Logger = cfg.Logger.With("test_member", id)
		cfg.ElectionTicks = 50 // see startCluster
		cfg.SnapshotCount = 30
		cfg.SnapshotCatchUpEntries = 5
		sms[id] = newPersistentSM()
		nodes[id] = mustStart(t, cfg, sms[id])
		net.attach(nodes[id])
	}
	c := &testCluster{net: net, nodes: nodes}
	lead := c.agreedLeader(t)
	lagging := c.follower(lead)
	net.isolate(lagging, true)

	proposeAll(t, nodes[lead], raftkit.PayloadRange("p", 0, 200))
	sms[lead].WaitPayloads(t, 200)
	laggingNext := sms[lagging].AppliedIndex() + 1
	raftkit.WaitFor(t, "leader to compact past the lagging member", func() bool {
		first, err := nodes[lead].storage.FirstIndex()
		return err == nil && first > laggingNext
	})
	raftkit.WaitFor(t, "the leader's snapshot in flight to finish", func() bool { return !nodes[lead].snapshotting.Load() })
	if markers, full := snapshotKinds(t, nodes[lead]); markers == 0 || full != 0 {
		t.Fatalf("leader has %d marker and %d full snapshot files before any follower needed one, want only markers", markers, full)
	}

	// No more proposals: raft's retries alone must get the leader to
	// write a full image and send it.
	net.isolate(lagging, false)
	sm := sms[lagging]
	sm.WaitPayloads(t, 200)
	sm.Check(t)
	restores := sm.Restores()
	if restores == 0 {
		t.Fatal("lagging member caught up without a snapshot; the test did not exercise the install path")
	}
	if got, want := strings.Join(sm.Payloads(), ","), strings.Join(sms[lead].Payloads(), ","); got != want {
		t.Fatal("lagging member's state differs from the leader's")
	}
	if _, full := snapshotKinds(t, nodes[lead]); full == 0 {
		t.Fatal("leader sent a snapshot without writing a full image")
	}
	if err := nodes[lagging].Err(); err != nil {
		t.Fatalf("lagging member failed: %v", err)
	}
}

func TestRaftStorageHidesInPlaceSnapshots(t *testing.T) {
	n := &Node{storage: raft.NewMemoryStorage(), fullSnapshotWanted: make(chan struct{}, 1)}
	s := raftStorage{MemoryStorage: n.storage, n: n}
	if err := n.storage.ApplySnapshot(snapshotAt(10)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(); !errors.Is(err, raft.ErrSnapshotTemporarilyUnavailable) {
		t.Fatalf("in-place snapshot handed to raft: err = %v", err)
	}
	select {
	case <-n.fullSnapshotWanted:
	default:
		t.Fatal("no full snapshot requested from the apply loop")
	}
	n.noteFullSnapshot(10)
	n.noteFullSnapshot(5) // older full images do not move the index back
	snap, err := s.Snapshot()
	if err != nil || snap.Metadata.Index != 10 {
		t.Fatalf("full snapshot: %v, index %d", err, snap.Metadata.Index)
	}
	select {
	case <-n.fullSnapshotWanted:
		t.Fatal("full snapshot requested although the newest one is full")
	default:
	}
}

func TestInspectSnapshotTellsMarkersFromImages(t *testing.T) {
	dir := t.TempDir()
	n := &Node{}
	snaps, err := raftsnap.Open(filepath.Join(dir, "snap"), raftsnap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n.snaps = snaps
	meta := snapshotAt(7).Metadata
	if _, err := snaps.Save(meta, markerImage{}); err != nil {
		t.Fatal(err)
	}
	_, inEngine, err := n.inspectSnapshot(raftsnap.Ref{Term: meta.Term, Index: meta.Index})
	if err != nil || !inEngine {
		t.Fatalf("marker file: inEngine %v, err %v", inEngine, err)
	}
	if _, err := snaps.Save(snapshotAt(8).Metadata, raftkit.ImageBytes(strings.Repeat("x", len(inPlaceMarker)))); err != nil {
		t.Fatal(err)
	}
	if _, inEngine, err := n.inspectSnapshot(raftsnap.Ref{Term: 1, Index: 8}); err != nil || inEngine {
		t.Fatalf("image as long as the marker: inEngine %v, err %v", inEngine, err)
	}
}

func snapshotAt(index uint64) raftpb.Snapshot {
	return raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: index, Term: 1, ConfState: raftpb.ConfState{Voters: []uint64{1}}}}
}

// A member added after the newest snapshot is not in that snapshot's
// configuration, and raft on it ignores such a snapshot: the leader must
// send a fresh one instead of resending the old one forever.
func TestMemberAddedAfterSnapshotCatchesUp(t *testing.T) {
	ids := []uint64{1, 2, 3, 4}
	net := newMemNetwork(t, ids...)
	nodes := map[uint64]*Node{}
	sms := map[uint64]*raftkit.StateMachine{}
	start := func(id uint64, join bool) {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = id
		if join {
			cfg.Join = true
		} else {
			cfg.Peers = []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}}
		}
		cfg.Transport = net.transport(id)
		cfg.Logger = cfg.Logger.With("test_member", id)
		cfg.ElectionTicks = 50 // see startCluster
		cfg.SnapshotCount = 30
		cfg.SnapshotCatchUpEntries = 5
		sms[id] = raftkit.New()
		nodes[id] = mustStart(t, cfg, sms[id])
		net.attach(nodes[id])
	}
	for _, id := range ids[:3] {
		start(id, false)
	}
	c := &testCluster{net: net, nodes: map[uint64]*Node{1: nodes[1], 2: nodes[2], 3: nodes[3]}}
	lead := c.agreedLeader(t)
	proposeAll(t, nodes[lead], raftkit.PayloadRange("p", 0, 100))
	sms[lead].WaitPayloads(t, 100)
	raftkit.WaitFor(t, "the leader to compact its log", func() bool {
		first, err := nodes[lead].storage.FirstIndex()
		return err == nil && first > 1 && !nodes[lead].snapshotting.Load()
	})

	cc := raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 4}
	if err := nodes[lead].ProposeConfChange(raftkit.Context(t), cc); err != nil {
		t.Fatal(err)
	}
	raftkit.WaitFor(t, "the leader to apply the new member", func() bool {
		return slices.Contains(nodes[lead].Status().Learners, 4)
	})
	start(4, true)
	sms[4].WaitPayloads(t, 100)
	sms[4].Check(t)
	if got, want := strings.Join(sms[4].Payloads(), ","), strings.Join(sms[lead].Payloads(), ","); got != want {
		t.Fatal("new member's state differs from the leader's")
	}
}

// paddedSM is a fakeSM whose images carry pad extra bytes, standing for
// a large store that cannot persist in place (the memory engine).
type paddedSM struct {
	*raftkit.StateMachine
	pad int
}

func (s paddedSM) Snapshot() (Image, error) {
	img, err := s.StateMachine.Snapshot()
	if err != nil {
		return nil, err
	}
	data := []byte(img.(raftkit.ImageBytes))
	return raftkit.ImageBytes(append(data[:len(data):len(data)], make([]byte, s.pad)...)), nil
}

// TestFullImagesWaitForAQuarterOfTheirSizeInLog: after a full image of S
// bytes, the next one is due only once the entries applied since hold
// S/fullImageLogFraction bytes, however many entries that takes.
func TestFullImagesWaitForAQuarterOfTheirSizeInLog(t *testing.T) {
	const pad = 64 << 10
	cfg := testConfig(t, t.TempDir())
	cfg.SnapshotCount = 20
	cfg.SnapshotCatchUpEntries = 5
	sm := paddedSM{StateMachine: raftkit.New(), pad: pad}
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	// 200 small entries: only the first SnapshotCount of them may take
	// a snapshot, the rest hold far less than pad/4 bytes.
	for i, p := range raftkit.PayloadRange("s", 0, 200) {
		proposeAll(t, n, []string{p})
		sm.WaitPayloads(t, i+1)
	}
	n.snapshotWG.Wait()
	if _, full := snapshotKinds(t, n); full != 1 {
		t.Fatalf("%d full snapshots after 200 small entries, want 1", full)
	}
	// Entries of 1 KiB: pad/4 bytes of them make the next one due.
	big := strings.Repeat("x", 1<<10)
	for i := range pad / fullImageLogFraction / len(big) * 2 {
		proposeAll(t, n, []string{fmt.Sprintf("%s%04d", big, i)})
		sm.WaitPayloads(t, 201+i)
	}
	n.Stop()
	if _, full := snapshotKinds(t, n); full < 2 {
		t.Fatalf("%d full snapshots once the log held twice a quarter of the image, want 2 or more", full)
	}
}
