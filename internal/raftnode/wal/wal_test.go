package wal

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

var testMeta = Metadata{MemberID: 0x11, ClusterID: 0x77}

// syncCounter counts data fsyncs through Options.SyncFile.
type syncCounter struct {
	mu sync.Mutex
	n  int
}

func (c *syncCounter) sync(f *os.File) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return SyncData(f)
}

func (c *syncCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// logBuffer captures log output so that tests can check what recovery said.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func ents(first, last, term uint64) []raftpb.Entry {
	var out []raftpb.Entry
	for i := first; i <= last; i++ {
		out = append(out, raftpb.Entry{Index: i, Term: term, Type: raftpb.EntryNormal, Data: []byte(fmt.Sprintf("data-%d-%d", term, i))})
	}
	return out
}

func mustCreate(t *testing.T, dir string, opts Options) *WAL {
	t.Helper()
	w, err := Create(dir, testMeta, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return w
}

func mustOpen(t *testing.T, dir string, opts Options) (*WAL, *Recovered) {
	t.Helper()
	w, rec, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return w, rec
}

func mustSave(t *testing.T, w *WAL, hs raftpb.HardState, es []raftpb.Entry) {
	t.Helper()
	if err := w.Save(hs, es); err != nil {
		t.Fatalf("Save: %v", err)
	}
}

func mustClose(t *testing.T, w *WAL) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func entriesEqual(t *testing.T, got, want []raftpb.Entry) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("entries differ:\n got %d entries %v\nwant %d entries %v", len(got), indexes(got), len(want), indexes(want))
	}
}

func indexes(es []raftpb.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%d@%d", e.Index, e.Term))
	}
	return out
}

func TestCreateOpenRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w := mustCreate(t, dir, Options{})
	hs := raftpb.HardState{Term: 2, Vote: 1, Commit: 3}
	mustSave(t, w, hs, ents(1, 5, 2))
	mustClose(t, w)

	w, rec := mustOpen(t, dir, Options{})
	defer mustClose(t, w)
	if rec.Metadata != testMeta {
		t.Fatalf("metadata = %+v, want %+v", rec.Metadata, testMeta)
	}
	if rec.HardState != hs {
		t.Fatalf("hard state = %+v, want %+v", rec.HardState, hs)
	}
	entriesEqual(t, rec.Entries, ents(1, 5, 2))
	if rec.LastIndex() != 5 {
		t.Fatalf("LastIndex = %d, want 5", rec.LastIndex())
	}
}

func TestCreateRefusesExistingLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	mustClose(t, mustCreate(t, dir, Options{}))
	if _, err := Create(dir, testMeta, Options{}); err == nil {
		t.Fatal("Create over an existing log succeeded")
	}
	if ok, err := Exists(dir); err != nil || !ok {
		t.Fatalf("Exists = %v, %v; want true", ok, err)
	}
	if ok, err := Exists(filepath.Join(t.TempDir(), "none")); err != nil || ok {
		t.Fatalf("Exists(missing) = %v, %v; want false", ok, err)
	}
}

func TestOpenMissingDirFails(t *testing.T) {
	if _, _, err := Open(filepath.Join(t.TempDir(), "none"), Options{}); err == nil {
		t.Fatal("Open of a missing dir succeeded")
	}
}

func TestSaveIsOneFsyncPerCall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	var c syncCounter
	w := mustCreate(t, dir, Options{SyncFile: c.sync})
	defer mustClose(t, w)

	steps := []struct {
		name      string
		hs        raftpb.HardState
		ents      []raftpb.Entry
		wantSyncs int
	}{
		{"many entries and a hard state", raftpb.HardState{Term: 1, Vote: 1, Commit: 0}, ents(1, 100, 1), 1},
		{"nothing", raftpb.HardState{}, nil, 0},
		{"unchanged hard state", raftpb.HardState{Term: 1, Vote: 1, Commit: 0}, nil, 0},
		{"commit only", raftpb.HardState{Term: 1, Vote: 1, Commit: 100}, nil, 0},
		{"term change", raftpb.HardState{Term: 2, Vote: 0, Commit: 100}, nil, 1},
		{"vote change", raftpb.HardState{Term: 2, Vote: 3, Commit: 100}, nil, 1},
		{"entries only", raftpb.HardState{}, ents(101, 101, 2), 1},
	}
	for _, s := range steps {
		before := c.count()
		mustSave(t, w, s.hs, s.ents)
		if got := c.count() - before; got != s.wantSyncs {
			t.Fatalf("%s: %d fsyncs, want %d", s.name, got, s.wantSyncs)
		}
	}
	before := c.count()
	if err := w.SaveSnapshot(Snapshot{Index: 50, Term: 1}); err != nil {
		t.Fatal(err)
	}
	if got := c.count() - before; got != 1 {
		t.Fatalf("SaveSnapshot: %d fsyncs, want 1", got)
	}
}

func TestCommitOnlyHardStateSurvivesClose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w := mustCreate(t, dir, Options{})
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1}, ents(1, 3, 1))
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: 3}, nil)
	mustClose(t, w)
	w, rec := mustOpen(t, dir, Options{})
	defer mustClose(t, w)
	if rec.HardState.Commit != 3 {
		t.Fatalf("commit = %d, want 3", rec.HardState.Commit)
	}
}

func TestOverwriteTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w := mustCreate(t, dir, Options{})
	mustSave(t, w, raftpb.HardState{Term: 1}, ents(1, 5, 1))
	// A new leader of term 2 truncates the follower's uncommitted 3..5.
	mustSave(t, w, raftpb.HardState{Term: 2}, ents(3, 4, 2))
	mustClose(t, w)

	w, rec := mustOpen(t, dir, Options{})
	want := append(ents(1, 2, 1), ents(3, 4, 2)...)
	entriesEqual(t, rec.Entries, want)
	// Appending after reopen continues from the overwritten tail.
	mustSave(t, w, raftpb.HardState{}, ents(5, 5, 2))
	mustClose(t, w)
	w, rec = mustOpen(t, dir, Options{})
	defer mustClose(t, w)
	entriesEqual(t, rec.Entries, append(want, ents(5, 5, 2)...))
}

func TestSaveRefusesGap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w := mustCreate(t, dir, Options{})
	defer mustClose(t, w)
	mustSave(t, w, raftpb.HardState{}, ents(1, 2, 1))
	if err := w.Save(raftpb.HardState{}, ents(4, 4, 1)); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("Save with a gap: err = %v, want a gap error", err)
	}
	// The refused Save wrote nothing; the log still accepts index 3.
	mustSave(t, w, raftpb.HardState{}, ents(3, 3, 1))
}

func TestSnapshotInstallResetsLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w := mustCreate(t, dir, Options{})
	mustSave(t, w, raftpb.HardState{Term: 1}, ents(1, 10, 1))
	if err := w.SaveInstall(Snapshot{Index: 20, Term: 3}, raftpb.HardState{Term: 3, Commit: 20}, ents(21, 22, 3)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, w)

	w, rec := mustOpen(t, dir, Options{})
	defer mustClose(t, w)
	entriesEqual(t, rec.Entries, ents(21, 22, 3))
	if !reflect.DeepEqual(rec.Snapshots, []Snapshot{{Index: 20, Term: 3}}) {
		t.Fatalf("snapshots = %+v", rec.Snapshots)
	}
	after, err := rec.EntriesAfter(20)
	if err != nil {
		t.Fatal(err)
	}
	entriesEqual(t, after, ents(21, 22, 3))
	if _, err := rec.EntriesAfter(10); err == nil {
		t.Fatal("EntriesAfter an index older than the installed snapshot succeeded")
	}
	if rec.LastIndex() != 22 {
		t.Fatalf("LastIndex = %d, want 22", rec.LastIndex())
	}
}

func TestInstallWithoutEntriesThenAppend(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w := mustCreate(t, dir, Options{})
	if err := w.SaveInstall(Snapshot{Index: 20, Term: 3}, raftpb.HardState{Term: 3, Commit: 20}, nil); err != nil {
		t.Fatal(err)
	}
	mustClose(t, w)
	w, rec := mustOpen(t, dir, Options{})
	if rec.LastIndex() != 20 || len(rec.Entries) != 0 {
		t.Fatalf("LastIndex = %d, %d entries; want 20 and none", rec.LastIndex(), len(rec.Entries))
	}
	if err := w.Save(raftpb.HardState{}, ents(22, 22, 3)); err == nil {
		t.Fatal("Save leaving a gap after an installed snapshot succeeded")
	}
	mustSave(t, w, raftpb.HardState{}, ents(21, 21, 3))
	mustClose(t, w)
	w, rec = mustOpen(t, dir, Options{})
	defer mustClose(t, w)
	entriesEqual(t, rec.Entries, ents(21, 21, 3))
}

func TestEntriesAfter(t *testing.T) {
	rec := &Recovered{Entries: ents(5, 9, 1)}
	cases := []struct {
		snap    uint64
		want    []raftpb.Entry
		wantErr bool
	}{
		{snap: 3, wantErr: true}, // entry 4 missing
		{snap: 4, want: ents(5, 9, 1)},
		{snap: 7, want: ents(8, 9, 1)},
		{snap: 9, want: nil},
		{snap: 12, want: nil},
	}
	for _, c := range cases {
		got, err := rec.EntriesAfter(c.snap)
		if (err != nil) != c.wantErr {
			t.Fatalf("EntriesAfter(%d) err = %v, wantErr %v", c.snap, err, c.wantErr)
		}
		entriesEqual(t, got, c.want)
	}
}

func TestRotationAndRelease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	opts := Options{SegmentSizeBytes: 512}
	w := mustCreate(t, dir, opts)
	for i := uint64(1); i <= 100; i++ {
		mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: i}, ents(i, i, 1))
	}
	if err := w.SaveSnapshot(Snapshot{Index: 60, Term: 1}); err != nil {
		t.Fatal(err)
	}
	segsBefore, _, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(segsBefore) < 5 {
		t.Fatalf("only %d segments after 100 saves of a 512-byte segment size", len(segsBefore))
	}
	if err := w.ReleaseTo(60); err != nil {
		t.Fatal(err)
	}
	segsAfter, _, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(segsAfter) >= len(segsBefore) {
		t.Fatalf("ReleaseTo(60) kept all %d segments", len(segsAfter))
	}
	if segsAfter[0].firstIndex > 60 {
		t.Fatalf("first kept segment starts at %d: entry 60's segment was released", segsAfter[0].firstIndex)
	}
	if len(segsAfter) > 1 && segsAfter[1].firstIndex <= 60 {
		t.Fatalf("segment starting at %d is wholly before 60 but was kept", segsAfter[0].firstIndex)
	}
	mustClose(t, w)

	w, rec := mustOpen(t, dir, opts)
	defer mustClose(t, w)
	if rec.Metadata != testMeta {
		t.Fatalf("metadata lost with released segments: %+v", rec.Metadata)
	}
	if rec.HardState.Commit != 100 {
		t.Fatalf("commit = %d, want 100", rec.HardState.Commit)
	}
	if !reflect.DeepEqual(rec.Snapshots[len(rec.Snapshots)-1], Snapshot{Index: 60, Term: 1}) {
		t.Fatalf("snapshots = %+v", rec.Snapshots)
	}
	after, err := rec.EntriesAfter(60)
	if err != nil {
		t.Fatal(err)
	}
	entriesEqual(t, after, ents(61, 100, 1))
}

func TestClosedWALRefusesWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w := mustCreate(t, dir, Options{})
	mustClose(t, w)
	mustClose(t, w) // idempotent
	if err := w.Save(raftpb.HardState{Term: 1}, nil); err != ErrClosed {
		t.Fatalf("Save after Close: %v, want ErrClosed", err)
	}
}

func TestFailedSyncPoisonsWAL(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	fail := false
	w := mustCreate(t, dir, Options{SyncFile: func(f *os.File) error {
		if fail {
			return fmt.Errorf("injected fsync failure")
		}
		return SyncData(f)
	}})
	defer w.Close()
	fail = true
	if err := w.Save(raftpb.HardState{Term: 1}, ents(1, 1, 1)); err == nil {
		t.Fatal("Save with a failing fsync succeeded")
	}
	fail = false
	if err := w.Save(raftpb.HardState{Term: 1}, ents(2, 2, 1)); err == nil {
		t.Fatal("Save after a failed fsync succeeded")
	}
}

// With MaxFiles (etcd's --max-wals) released segments stay until more
// than MaxFiles files exist, oldest deleted first; a log kept whole reads
// back with the released entries before the snapshot.
func TestReleaseKeepsMaxFiles(t *testing.T) {
	for _, max := range []int{-1, 3, 6} {
		dir := filepath.Join(t.TempDir(), "log")
		opts := Options{SegmentSizeBytes: 512, MaxFiles: max}
		w := mustCreate(t, dir, opts)
		for i := uint64(1); i <= 100; i++ {
			mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: i}, ents(i, i, 1))
		}
		before, _, err := listSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.SaveSnapshot(Snapshot{Index: 90, Term: 1}); err != nil {
			t.Fatal(err)
		}
		if err := w.ReleaseTo(90); err != nil {
			t.Fatal(err)
		}
		after, _, err := listSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := len(before)
		if max > 0 {
			want = max
		}
		if len(after) != want || after[len(after)-1] != before[len(before)-1] {
			t.Fatalf("MaxFiles %d: %d of %d segments kept, want the newest %d", max, len(after), len(before), want)
		}
		mustClose(t, w)
		w, rec := mustOpen(t, dir, opts)
		got, err := rec.EntriesAfter(90)
		if err != nil {
			t.Fatal(err)
		}
		entriesEqual(t, got, ents(91, 100, 1))
		mustClose(t, w)
	}
}
