package wal

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// noSync skips fsync in tests that open thousands of logs and do not test
// durability.
func noSync(*os.File) error { return nil }

// writtenEvent is one record the model log wrote, with the file offset just
// past it. The model is computed from the frame layout (9-byte header +
// payload), independently of the decoder under test.
type writtenEvent struct {
	start, end int64
	entry      *raftpb.Entry
	hardState  *raftpb.HardState
}

const metadataRecordSize = headerSize + metadataSize

// buildModelLog writes a single-segment log of several Saves and returns its
// bytes and the records it holds after the metadata head.
func buildModelLog(t *testing.T) ([]byte, []writtenEvent) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	w := mustCreate(t, dir, Options{SyncFile: noSync})
	var events []writtenEvent
	off := int64(metadataRecordSize)
	var prevHS raftpb.HardState
	next := uint64(1)
	for save := 1; save <= 12; save++ {
		n := uint64(save%3 + 1)
		es := ents(next, next+n-1, uint64(save/4+1))
		next += n
		hs := raftpb.HardState{Term: uint64(save/4 + 1), Vote: 1, Commit: next - 2}
		for i := range es {
			e := es[i]
			size := int64(headerSize + e.Size())
			events = append(events, writtenEvent{start: off, end: off + size, entry: &e})
			off += size
		}
		if hs != prevHS {
			h := hs
			size := int64(headerSize + h.Size())
			events = append(events, writtenEvent{start: off, end: off + size, hardState: &h})
			off += size
			prevHS = hs
		}
		mustSave(t, w, hs, es)
	}
	mustClose(t, w)
	data, err := os.ReadFile(filepath.Join(dir, segment{}.name()))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != off {
		t.Fatalf("model says %d bytes, file has %d", off, len(data))
	}
	return data, events
}

// expectPrefix is what Open must recover when the file is intact up to cut.
func expectPrefix(events []writtenEvent, cut int64) ([]raftpb.Entry, raftpb.HardState, int64) {
	var es []raftpb.Entry
	var hs raftpb.HardState
	intact := int64(metadataRecordSize)
	for _, ev := range events {
		if ev.end > cut {
			break
		}
		intact = ev.end
		if ev.entry != nil {
			es = append(es, *ev.entry)
		} else {
			hs = *ev.hardState
		}
	}
	return es, hs, intact
}

// openSegmentBytes writes data as the only segment of a fresh log dir and
// opens it.
func openSegmentBytes(t *testing.T, data []byte, opts Options) (string, *WAL, *Recovered, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, segment{}.name())
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	w, rec, err := Open(dir, opts)
	return dir, w, rec, err
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestTruncateAtEveryOffset(t *testing.T) {
	data, events := buildModelLog(t)
	opts := Options{SyncFile: noSync}
	for cut := int64(0); cut <= int64(len(data)); cut++ {
		if cut < metadataRecordSize {
			if _, w, _, err := openSegmentBytes(t, data[:cut], opts); err == nil {
				w.Close()
				t.Fatalf("cut %d inside the metadata head: Open succeeded", cut)
			}
			continue
		}
		checkCutRecovers(t, data, events, cut, opts)
	}
}

// checkCutRecovers opens a log whose only segment holds data up to cut,
// followed by zeros up to opts' reserve when it preallocates. Open must
// recover the records intact before the cut, leave the file its intact
// prefix (or its reserve), and go on appending where that prefix ended.
func checkCutRecovers(t *testing.T, data []byte, events []writtenEvent, cut int64, opts Options) {
	t.Helper()
	file := data[:cut]
	if opts.Preallocate {
		file = make([]byte, opts.SegmentSizeBytes)
		copy(file, data[:cut])
	}
	dir, w, rec, err := openSegmentBytes(t, file, opts)
	if err != nil {
		t.Fatalf("cut %d: Open: %v", cut, err)
	}
	wantEnts, wantHS, intact := expectPrefix(events, cut)
	entriesEqual(t, rec.Entries, wantEnts)
	if rec.HardState != wantHS {
		t.Fatalf("cut %d: hard state %+v, want %+v", cut, rec.HardState, wantHS)
	}
	wantSize := intact
	if opts.Preallocate {
		wantSize = opts.SegmentSizeBytes
	}
	if got := fileSize(t, filepath.Join(dir, segment{}.name())); got != wantSize {
		t.Fatalf("cut %d: file is %d bytes after Open, want %d", cut, got, wantSize)
	}
	// The repaired log appends where the intact prefix ended.
	nextIndex := uint64(1)
	if len(wantEnts) > 0 {
		nextIndex = wantEnts[len(wantEnts)-1].Index + 1
	}
	extra := ents(nextIndex, nextIndex, 9)
	mustSave(t, w, raftpb.HardState{Term: 9, Vote: 2, Commit: 1}, extra)
	mustClose(t, w)
	w, rec = mustOpen(t, dir, opts)
	entriesEqual(t, rec.Entries, append(wantEnts, extra...))
	if rec.HardState != (raftpb.HardState{Term: 9, Vote: 2, Commit: 1}) {
		t.Fatalf("cut %d: hard state after append %+v", cut, rec.HardState)
	}
	mustClose(t, w)
}

func TestFlipByteAtEveryOffset(t *testing.T) {
	data, events := buildModelLog(t)
	opts := Options{SyncFile: noSync}
	for off := 0; off < len(data); off++ {
		for _, mask := range []byte{0x01, 0xff} {
			bad := bytes.Clone(data)
			bad[off] ^= mask
			dir, w, rec, err := openSegmentBytes(t, bad, opts)
			if off < metadataRecordSize {
				if err == nil {
					w.Close()
					t.Fatalf("flip at %d in the metadata head: Open succeeded", off)
				}
				continue
			}
			if err != nil {
				t.Fatalf("flip %#x at %d: Open: %v", mask, off, err)
			}
			// Everything before the record holding the flipped byte survives.
			var recordStart int64
			for _, ev := range events {
				if int64(off) >= ev.start && int64(off) < ev.end {
					recordStart = ev.start
				}
			}
			wantEnts, wantHS, _ := expectPrefix(events, recordStart)
			entriesEqual(t, rec.Entries, wantEnts)
			if rec.HardState != wantHS {
				t.Fatalf("flip at %d: hard state %+v, want %+v", off, rec.HardState, wantHS)
			}
			if got := fileSize(t, filepath.Join(dir, segment{}.name())); got != recordStart {
				t.Fatalf("flip at %d: file truncated to %d, want %d", off, got, recordStart)
			}
			mustClose(t, w)
		}
	}
}

func TestTornTailIsLoggedWithFileAndOffset(t *testing.T) {
	data, events := buildModelLog(t)
	var logs logBuffer
	// A record cut short: a header promising more than is there.
	torn := append(bytes.Clone(data), 0x40, 0, 0, 0, 1, 2, 3, 4, 2, 7, 7)
	dir, w, rec, err := openSegmentBytes(t, torn, Options{Logger: logs.logger(), SyncFile: noSync})
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, w)
	wantEnts, _, _ := expectPrefix(events, int64(len(data)))
	entriesEqual(t, rec.Entries, wantEnts)
	out := logs.String()
	path := filepath.Join(dir, segment{}.name())
	if !strings.Contains(out, "truncating torn WAL tail") || !strings.Contains(out, path) || !strings.Contains(out, "offset="+strconv.Itoa(len(data))) {
		t.Fatalf("warning does not name file and offset: %q", out)
	}
}

// buildMultiSegmentLog writes enough to cut several segments.
func buildMultiSegmentLog(t *testing.T) (string, []raftpb.Entry) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "log")
	opts := Options{SegmentSizeBytes: 300, SyncFile: noSync}
	w := mustCreate(t, dir, opts)
	all := ents(1, 40, 1)
	for i := range all {
		mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: all[i].Index}, all[i:i+1])
	}
	mustClose(t, w)
	return dir, all
}

func TestCorruptNonLastSegmentRefusesToOpen(t *testing.T) {
	dir, _ := buildMultiSegmentLog(t)
	segs, _, err := listSegments(dir)
	if err != nil || len(segs) < 3 {
		t.Fatalf("want >= 3 segments, got %d (%v)", len(segs), err)
	}
	victim := filepath.Join(dir, segs[1].name())
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	off := len(data) - 3
	data[off] ^= 0xff
	if err := os.WriteFile(victim, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Open(dir, Options{SyncFile: noSync})
	if err == nil {
		t.Fatal("Open with a corrupt middle segment succeeded")
	}
	if !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("error does not name file and offset: %v", err)
	}
}

func TestTruncateLastOfManySegments(t *testing.T) {
	dir, all := buildMultiSegmentLog(t)
	segs, _, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	last := filepath.Join(dir, segs[len(segs)-1].name())
	full, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{SyncFile: noSync}
	prevLen := -1
	for cut := 0; cut <= len(full); cut++ {
		if err := os.WriteFile(last, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		w, rec := mustOpen(t, dir, opts)
		n := len(rec.Entries)
		if n < prevLen {
			t.Fatalf("cut %d recovered %d entries, fewer than the shorter cut before (%d)", cut, n, prevLen)
		}
		prevLen = n
		entriesEqual(t, rec.Entries, all[:n])
		if rec.Metadata != testMeta {
			t.Fatalf("cut %d: metadata %+v", cut, rec.Metadata)
		}
		// Reopening again (head possibly rewritten) yields the same log.
		mustClose(t, w)
		w, rec2 := mustOpen(t, dir, opts)
		entriesEqual(t, rec2.Entries, rec.Entries)
		mustClose(t, w)
	}
	if prevLen != len(all) {
		t.Fatalf("the intact log recovered %d entries, want %d", prevLen, len(all))
	}
}

func TestMissingMiddleSegmentRefusesToOpen(t *testing.T) {
	dir, _ := buildMultiSegmentLog(t)
	segs, _, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, segs[1].name())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir, Options{SyncFile: noSync}); err == nil || !strings.Contains(err.Error(), "missing segment") {
		t.Fatalf("Open with a missing segment: %v", err)
	}
}

// handSegment encodes records directly, to build logs the writer refuses to
// produce.
func handSegment(t *testing.T, meta Metadata, es []raftpb.Entry) []byte {
	t.Helper()
	buf := appendMetadata(nil, meta)
	for i := range es {
		var err error
		if buf, err = appendEntry(buf, &es[i]); err != nil {
			t.Fatal(err)
		}
	}
	return buf
}

func TestIndexGapRefusesToOpen(t *testing.T) {
	data := handSegment(t, testMeta, append(ents(1, 2, 1), ents(4, 4, 1)...))
	dir, _, _, err := openSegmentBytes(t, data, Options{SyncFile: noSync})
	if err == nil {
		t.Fatal("Open of a log with an index gap succeeded")
	}
	path := filepath.Join(dir, segment{}.name())
	if !strings.Contains(err.Error(), "gap") || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("error does not name the gap, file and offset: %v", err)
	}
}

func TestForeignMetadataRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	first := handSegment(t, testMeta, ents(1, 2, 1))
	second := handSegment(t, Metadata{MemberID: 99, ClusterID: 77}, ents(3, 3, 1))
	if err := os.WriteFile(filepath.Join(dir, segment{seq: 0}.name()), first, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, segment{seq: 1, firstIndex: 3}.name()), second, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir, Options{SyncFile: noSync}); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("Open of a log mixing members: %v", err)
	}
}

func TestLeftoverTempSegmentIsRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	mustClose(t, mustCreate(t, dir, Options{SyncFile: noSync}))
	tmp := filepath.Join(dir, segment{seq: 1, firstIndex: 5}.name()+tmpExt)
	if err := os.WriteFile(tmp, []byte("half a segment"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, _ := mustOpen(t, dir, Options{SyncFile: noSync})
	defer mustClose(t, w)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("leftover temp segment still there: %v", err)
	}
}

func TestParseSegmentName(t *testing.T) {
	s := segment{seq: 0x1f, firstIndex: 0xabc}
	got, ok := parseSegmentName(s.name())
	if !ok || got != s {
		t.Fatalf("parseSegmentName(%q) = %+v, %v", s.name(), got, ok)
	}
	for _, bad := range []string{"", "x.wal", "000000000000001F-0000000000000abc.wal", "000000000000001f_0000000000000abc.wal", "000000000000001f-0000000000000abc.wal.tmp"} {
		if _, ok := parseSegmentName(bad); ok {
			t.Fatalf("parseSegmentName(%q) accepted", bad)
		}
	}
}

func FuzzScanRecords(f *testing.F) {
	valid := handSegment(&testing.T{}, testMeta, ents(1, 3, 1))
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add(make([]byte, 64))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		count := 0
		intact, decodeErr, fnErr := scanRecords(data, func(*record) error { count++; return nil })
		if fnErr != nil {
			t.Fatalf("callback error leaked: %v", fnErr)
		}
		if intact < 0 || intact > len(data) {
			t.Fatalf("intact prefix %d outside [0, %d]", intact, len(data))
		}
		if decodeErr == nil && intact != len(data) {
			t.Fatalf("clean scan stopped at %d of %d", intact, len(data))
		}
		again := 0
		intact2, decodeErr2, _ := scanRecords(data[:intact], func(*record) error { again++; return nil })
		if decodeErr2 != nil || intact2 != intact || again != count {
			t.Fatalf("intact prefix does not rescan cleanly: %v, %d/%d records", decodeErr2, again, count)
		}
	})
}

func FuzzOpenSegment(f *testing.F) {
	valid := handSegment(&testing.T{}, testMeta, ents(1, 3, 1))
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add(append(bytes.Clone(valid), 0, 0, 0, 0, 0))
	f.Add(append(append(bytes.Clone(valid), make([]byte, 64)...), 1)) // zeros, then not
	f.Add(handSegment(&testing.T{}, testMeta, append(ents(1, 1, 1), ents(3, 3, 1)...)))
	f.Add([]byte("not a wal at all"))
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := Options{SyncFile: noSync}
		dir, w, _, err := openSegmentBytes(t, data, opts)
		if err != nil {
			return
		}
		next := uint64(1)
		if w.lastIndexKnown {
			next = w.lastIndex + 1
		}
		if err := w.Save(raftpb.HardState{Term: 1}, ents(next, next, 1)); err != nil {
			t.Fatalf("Save after a successful Open: %v", err)
		}
		mustClose(t, w)
		w, rec2, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("reopen after append: %v", err)
		}
		defer mustClose(t, w)
		if n := len(rec2.Entries); n == 0 || rec2.Entries[n-1].Index != next {
			t.Fatalf("reopened log does not end with the appended entry %d: %v", next, indexes(rec2.Entries))
		}
	})
}
