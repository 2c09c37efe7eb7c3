package raftnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/raftnode/wal"

	"github.com/metastore-io/metastore/test/raftkit"
)

func TestConcurrentProposalsAppliedOnceInOrder(t *testing.T) {
	sm := raftkit.New()
	n := mustStart(t, testConfig(t, t.TempDir()), sm)
	waitLeader(t, n)

	const proposers, each = 8, 100
	var wg sync.WaitGroup
	for g := 0; g < proposers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proposeAll(t, n, raftkit.PayloadRange(fmt.Sprintf("g%d", g), 0, each))
		}()
	}
	wg.Wait()
	sm.WaitPayloads(t, proposers*each)
	sm.Check(t)

	got := sm.Payloads()
	if len(got) != proposers*each {
		t.Fatalf("applied %d payloads, want %d", len(got), proposers*each)
	}
	seen := map[string]bool{}
	next := map[string]int{}
	for _, p := range got {
		if seen[p] {
			t.Fatalf("payload %q applied twice", p)
		}
		seen[p] = true
		// Each proposer proposed sequentially, so its payloads keep order.
		var g string
		var i int
		if _, err := fmt.Sscanf(strings.Replace(p, "-", " ", 1), "%s %d", &g, &i); err != nil {
			t.Fatal(err)
		}
		if i != next[g] {
			t.Fatalf("proposer %s: payload %d applied when %d was expected", g, i, next[g])
		}
		next[g]++
	}
	st := n.Status()
	if !st.IsLeader || st.Leader != 1 || st.AppliedIndex < uint64(proposers*each) || st.CommitIndex < st.AppliedIndex || st.LastIndex < st.CommitIndex {
		t.Fatalf("unexpected status %+v", st)
	}
}

func TestRestartReplaysOnlyWhatWasNotApplied(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	proposeAll(t, n, raftkit.PayloadRange("a", 0, 30))
	sm.WaitPayloads(t, 30)
	// A state machine that persisted only the first 30 payloads.
	partial := sm.Image()
	proposeAll(t, n, raftkit.PayloadRange("a", 30, 50))
	sm.WaitPayloads(t, 50)
	n.Stop()
	want := sm.Payloads()

	cases := []struct {
		name string
		sm   func(t *testing.T) *raftkit.StateMachine
	}{
		{"state machine holds everything", func(*testing.T) *raftkit.StateMachine { return sm }},
		{"state machine lost its tail", func(t *testing.T) *raftkit.StateMachine {
			lagging := raftkit.New()
			if err := lagging.Restore(strings.NewReader(string(partial)), raftpb.SnapshotMetadata{Index: decodeApplied(t, partial)}); err != nil {
				t.Fatal(err)
			}
			return lagging
		}},
		{"state machine is empty", func(*testing.T) *raftkit.StateMachine { return raftkit.New() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sm2 := c.sm(t)
			n2 := mustStart(t, cfg, sm2)
			waitLeader(t, n2)
			proposeAll(t, n2, []string{"after-restart"})
			sm2.WaitPayloads(t, len(want)+1)
			sm2.Check(t)
			got := sm2.Payloads()
			if strings.Join(got[:len(want)], ",") != strings.Join(want, ",") || got[len(want)] != "after-restart" || len(got) != len(want)+1 {
				t.Fatalf("after restart the state machine holds %d payloads %v, want %v + after-restart", len(got), got, want)
			}
			n2.Stop()
			// Keep the shared state machine in step with the log for the
			// cases after this one.
			want = got
		})
	}
}

func decodeApplied(t *testing.T, image []byte) uint64 {
	t.Helper()
	probe := raftkit.New()
	if err := probe.Restore(strings.NewReader(string(image)), raftpb.SnapshotMetadata{}); err != nil {
		t.Fatal(err)
	}
	return probe.AppliedIndex()
}

func TestSnapshotCompactsLogAndReleasesWAL(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SnapshotCount = 40
	cfg.SnapshotCatchUpEntries = 10
	cfg.WALSegmentSizeBytes = 2048
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	// One entry per Ready, so that the log grows by many small saves:
	// several snapshots and segment rotations.
	for i, p := range raftkit.PayloadRange("s", 0, 400) {
		proposeAll(t, n, []string{p})
		sm.WaitPayloads(t, i+1)
	}
	n.Stop() // waits for a snapshot in flight

	first, err := n.storage.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= 100 {
		t.Fatalf("raft log still starts at %d after snapshots: not compacted", first)
	}
	snaps, err := raftsnap.Open(filepath.Join(dir, "snap"), raftsnap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := snaps.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) == 0 || len(refs) > raftsnap.DefaultKeep {
		t.Fatalf("%d snapshot files, want 1..%d", len(refs), raftsnap.DefaultKeep)
	}
	newest := refs[len(refs)-1].Index
	if newest < 300 {
		t.Fatalf("newest snapshot at %d after 400+ entries with SnapshotCount 40", newest)
	}
	segs := walSegments(t, filepath.Join(dir, "wal"))
	if segs[0] == "0000000000000000-0000000000000000.wal" {
		t.Fatalf("first WAL segment was never released: %v", segs)
	}

	// Restart from snapshot + WAL tail with an empty state machine.
	sm2 := raftkit.New()
	n2 := mustStart(t, cfg, sm2)
	if sm2.Restores() != 1 {
		t.Fatalf("state machine restored %d times on restart, want 1", sm2.Restores())
	}
	waitLeader(t, n2)
	proposeAll(t, n2, []string{"tail"})
	sm2.WaitPayloads(t, 401)
	sm2.Check(t)
	want := append(sm.Payloads(), "tail")
	if got := sm2.Payloads(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("restart from snapshot: %d payloads, want %d", len(got), len(want))
	}
}

func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".wal") {
			names = append(names, de.Name())
		}
	}
	return names
}

func TestCorruptNewestSnapshotRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SnapshotCount = 10
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	proposeAll(t, n, raftkit.PayloadRange("c", 0, 40))
	sm.WaitPayloads(t, 40)
	n.Stop()

	snaps, err := raftsnap.Open(filepath.Join(dir, "snap"), raftsnap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := snaps.List()
	if err != nil || len(refs) == 0 {
		t.Fatalf("no snapshot files: %v", err)
	}
	path := snaps.Path(refs[len(refs)-1])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Start(cfg, raftkit.New())
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Start with a corrupt newest snapshot: err = %v, want an error naming %s", err, path)
	}
}

func TestUnrecordedSnapshotFileIsRemoved(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	proposeAll(t, n, raftkit.PayloadRange("u", 0, 5))
	sm.WaitPayloads(t, 5)
	n.Stop()
	// A snapshot file whose WAL marker a crash prevented.
	snaps, err := raftsnap.Open(filepath.Join(dir, "snap"), raftsnap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img, _ := sm.Snapshot()
	orphan := raftpb.SnapshotMetadata{Index: sm.AppliedIndex(), Term: n.Status().Term}
	if _, err := snaps.Save(orphan, img); err != nil {
		t.Fatal(err)
	}
	sm2 := raftkit.New()
	n2 := mustStart(t, cfg, sm2)
	if sm2.Restores() != 0 {
		t.Fatal("restarted from a snapshot file the WAL never recorded")
	}
	if refs, _ := n2.Snapshots().List(); len(refs) != 0 {
		t.Fatalf("unrecorded snapshot file kept: %v", refs)
	}
	sm2.WaitPayloads(t, 5)
}

func TestForeignDataDirRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	n := mustStart(t, cfg, raftkit.New())
	waitLeader(t, n)
	n.Stop()
	other := cfg
	other.ID = 2
	other.Peers = nil
	if _, err := Start(other, raftkit.New()); err == nil || !strings.Contains(err.Error(), "belongs to member 1") {
		t.Fatalf("Start of member 2 on member 1's dir: %v", err)
	}
	other = cfg
	other.ClusterID = 0xdead
	if _, err := Start(other, raftkit.New()); err == nil || !strings.Contains(err.Error(), "cluster") {
		t.Fatalf("Start in another cluster: %v", err)
	}
}

func TestStateMachineWithoutWALRefused(t *testing.T) {
	sm := raftkit.New()
	sm.SetApplied(7)
	if _, err := Start(testConfig(t, t.TempDir()), sm); err == nil {
		t.Fatal("Start with a non-empty state machine and no WAL succeeded")
	}
}

func TestStopIsGracefulAndIdempotent(t *testing.T) {
	sm := raftkit.New()
	n := mustStart(t, testConfig(t, t.TempDir()), sm)
	waitLeader(t, n)
	proposeAll(t, n, []string{"x"})
	sm.WaitPayloads(t, 1)
	n.Stop()
	n.Stop()
	select {
	case <-n.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if n.Err() != nil {
		t.Fatalf("Err after a clean stop: %v", n.Err())
	}
	ctx := raftkit.Context(t)
	if err := n.Propose(ctx, []byte("late")); !errors.Is(err, ErrStopped) {
		t.Fatalf("Propose after Stop: %v", err)
	}
	if err := n.LinearizableRead(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("LinearizableRead after Stop: %v", err)
	}
	if err := n.Step(ctx, raftpb.Message{Type: raftpb.MsgHeartbeat}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Step after Stop: %v", err)
	}
}

func TestMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := testConfig(t, t.TempDir())
	cfg.Metrics = reg
	var leaders []uint64
	var mu sync.Mutex
	cfg.OnLeaderChange = func(leader, term uint64) {
		mu.Lock()
		leaders = append(leaders, leader)
		mu.Unlock()
	}
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	proposeAll(t, n, raftkit.PayloadRange("m", 0, 10))
	sm.WaitPayloads(t, 10)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	value := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			value[f.GetName()] = m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			value[f.GetName()] = m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			value[f.GetName()] = float64(m.GetHistogram().GetSampleCount())
		}
	}
	for name, atLeast := range map[string]float64{
		"etcd_disk_wal_fsync_duration_seconds":  1,
		"etcd_disk_wal_write_duration_seconds":  1,
		"etcd_disk_wal_write_bytes_total":       1,
		"etcd_server_proposals_applied_total":   10,
		"etcd_server_proposals_committed_total": 10,
		"etcd_server_leader_changes_seen_total": 1,
		"etcd_server_is_leader":                 1,
		"etcd_server_has_leader":                1,
	} {
		if got, ok := value[name]; !ok || got < atLeast {
			t.Fatalf("metric %s = %v (registered %v), want >= %v", name, got, ok, atLeast)
		}
	}
	if got := value["etcd_server_leader_changes_seen_total"]; got != 1 {
		t.Fatalf("leader changes = %v, want 1", got)
	}
	mu.Lock()
	if len(leaders) != 1 || leaders[0] != 1 {
		t.Fatalf("OnLeaderChange calls %v, want [1]", leaders)
	}
	mu.Unlock()
	n.Stop()
	// Stop unregisters, so a restarted member can register again.
	n2 := mustStart(t, cfg, sm)
	n2.Stop()
}

func TestWALRecordsMetadata(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	n := mustStart(t, cfg, raftkit.New())
	waitLeader(t, n)
	n.Stop()
	w, rec, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if rec.Metadata != (wal.Metadata{MemberID: cfg.ID, ClusterID: cfg.ClusterID}) {
		t.Fatalf("WAL metadata %+v", rec.Metadata)
	}
}

func TestStartOnCreatedButEmptyWAL(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	// A member that crashed right after creating its WAL.
	w, err := wal.Create(filepath.Join(dir, "wal"), wal.Metadata{MemberID: cfg.ID, ClusterID: cfg.ClusterID}, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	proposeAll(t, n, []string{"first"})
	sm.WaitPayloads(t, 1)
}

// TestProposeUntilWithoutLeaderEndsAtDeadline: without a leader a
// proposal waits, and ends at its deadline (the caller's context has
// none) with an error wrapping ErrProposalUnconfirmed and
// context.DeadlineExceeded, as when its context ends.
func TestProposeUntilWithoutLeaderEndsAtDeadline(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.TickInterval = time.Hour
	n := mustStart(t, cfg, raftkit.New())
	deadline := time.Now().Add(50 * time.Millisecond)
	err := n.ProposeUntil(raftkit.Context(t), deadline, []byte("x"))
	if !errors.Is(err, ErrProposalUnconfirmed) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("proposal without a leader: %v, want ErrProposalUnconfirmed and DeadlineExceeded", err)
	}
	if time.Now().Before(deadline) {
		t.Fatal("the proposal ended before its deadline")
	}
	campaign(t, n)
	if err := n.ProposeUntil(raftkit.Context(t), time.Now().Add(time.Hour), []byte("y")); err != nil {
		t.Fatal(err)
	}
}
