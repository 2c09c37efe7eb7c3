package wal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

const testReserve = 8 << 10

func preallocOpts(logs *logBuffer) Options {
	o := Options{SyncFile: noSync, Preallocate: true, SegmentSizeBytes: testReserve}
	if logs != nil {
		o.Logger = logs.logger()
	}
	return o
}

func TestPreallocatedSegmentReopensWithoutRepair(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	var logs logBuffer
	opts := preallocOpts(&logs)
	w := mustCreate(t, dir, opts)
	path := filepath.Join(dir, segment{}.name())
	if got := fileSize(t, path); got != testReserve {
		t.Fatalf("new segment is %d bytes, want the reserve %d", got, testReserve)
	}
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: 2}, ents(1, 3, 1))
	mustClose(t, w)
	w, rec := mustOpen(t, dir, opts)
	entriesEqual(t, rec.Entries, ents(1, 3, 1))
	if strings.Contains(logs.String(), "torn") {
		t.Fatalf("reserved space was taken for a torn tail: %s", logs.String())
	}
	if got := fileSize(t, path); got != testReserve {
		t.Fatalf("segment is %d bytes after Open, want the reserve %d kept", got, testReserve)
	}
	// Writing resumes after the last record, not at the end of the file.
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: 4}, ents(4, 5, 1))
	mustClose(t, w)
	w, rec = mustOpen(t, dir, opts)
	defer mustClose(t, w)
	entriesEqual(t, rec.Entries, ents(1, 5, 1))
	if rec.HardState.Commit != 4 {
		t.Fatalf("commit %d, want 4", rec.HardState.Commit)
	}
}

// Crash points of a preallocated segment: the records up to the cut, then
// the zeros of the reserve. Open recovers what the unreserved log recovers
// at the same cut, and the log goes on from there. Every third offset, and
// every offset of the last records (TestTruncateAtEveryOffset covers each
// offset of the unreserved log; this keeps the test to seconds).
func TestPreallocatedTruncateAtEveryOffset(t *testing.T) {
	data, events := buildModelLog(t)
	opts := preallocOpts(nil)
	for cut := int64(metadataRecordSize); cut <= int64(len(data)); cut++ {
		if cut%3 != 0 && cut < int64(len(data))-80 {
			continue
		}
		checkCutRecovers(t, data, events, cut, opts)
	}
}

func TestPreallocatedTornRecordIsRepaired(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	var logs logBuffer
	opts := preallocOpts(&logs)
	w := mustCreate(t, dir, opts)
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1}, ents(1, 2, 1))
	end := w.tailSize
	mustClose(t, w)
	path := filepath.Join(dir, segment{}.name())
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Half a record in the reserved space.
	if _, err := f.WriteAt([]byte{0x30, 0, 0, 0, 9, 9, 9, 9, 2, 1}, end); err != nil {
		t.Fatal(err)
	}
	f.Close()
	w, rec := mustOpen(t, dir, opts)
	entriesEqual(t, rec.Entries, ents(1, 2, 1))
	if !strings.Contains(logs.String(), "truncating torn WAL tail") {
		t.Fatalf("torn record in reserved space not reported: %s", logs.String())
	}
	if got := fileSize(t, path); got != testReserve {
		t.Fatalf("segment is %d bytes after the repair, want the reserve %d again", got, testReserve)
	}
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1}, ents(3, 3, 1))
	mustClose(t, w)
	w, rec = mustOpen(t, dir, opts)
	defer mustClose(t, w)
	entriesEqual(t, rec.Entries, ents(1, 3, 1))
}

func TestPreallocatedSegmentsAreCutBackWhenTheNextIsCut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	opts := Options{SyncFile: noSync, Preallocate: true, SegmentSizeBytes: 512}
	w := mustCreate(t, dir, opts)
	all := ents(1, 40, 1)
	for i := range all {
		mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: all[i].Index}, all[i:i+1])
	}
	mustClose(t, w)
	segs, _, err := listSegments(dir)
	if err != nil || len(segs) < 3 {
		t.Fatalf("want >= 3 segments, got %d (%v)", len(segs), err)
	}
	for _, s := range segs[:len(segs)-1] {
		data, err := os.ReadFile(filepath.Join(dir, s.name()))
		if err != nil {
			t.Fatal(err)
		}
		if intact, decodeErr, _ := scanRecords(data, func(*record) error { return nil }); decodeErr != nil || intact != len(data) {
			t.Fatalf("segment %s ends in %d bytes that are not records (%v)", s.name(), len(data)-intact, decodeErr)
		}
	}
	w, rec := mustOpen(t, dir, opts)
	entriesEqual(t, rec.Entries, all)
	mustClose(t, w)

	// Zeros after the records of a segment that is not the last are not
	// reserved space but lost records.
	victim := filepath.Join(dir, segs[1].name())
	f, err := os.OpenFile(victim, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 256)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := Open(dir, opts); err == nil || !strings.Contains(err.Error(), victim) {
		t.Fatalf("zero-filled middle segment: Open returned %v", err)
	}
}

// A log written before preallocation (an older member) gets its reserve on
// the first Open that preallocates, and goes on where its records end.
func TestUnreservedLogIsReservedOnOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	w := mustCreate(t, dir, Options{SyncFile: noSync, SegmentSizeBytes: testReserve})
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: 2}, ents(1, 3, 1))
	mustClose(t, w)
	path := filepath.Join(dir, segment{}.name())
	if got := fileSize(t, path); got >= testReserve {
		t.Fatalf("segment written without preallocation is %d bytes", got)
	}
	opts := preallocOpts(nil)
	w, rec := mustOpen(t, dir, opts)
	entriesEqual(t, rec.Entries, ents(1, 3, 1))
	if got := fileSize(t, path); got != testReserve {
		t.Fatalf("segment is %d bytes after a preallocating Open, want %d", got, testReserve)
	}
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: 4}, ents(4, 4, 1))
	mustClose(t, w)
	w, rec = mustOpen(t, dir, opts)
	defer mustClose(t, w)
	entriesEqual(t, rec.Entries, ents(1, 4, 1))
}
