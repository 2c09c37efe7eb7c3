package wal

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestEntryHeadIsAppendEntryWithoutData: the record written in two pieces
// (appendEntryHead, then the Data) is byte for byte the one appendEntry
// writes, for every Data from none to a large one.
func TestEntryHeadIsAppendEntryWithoutData(t *testing.T) {
	for _, e := range []raftpb.Entry{
		{Index: 1, Term: 1},
		{Index: 2, Term: 1, Data: []byte{}},
		{Index: 1 << 40, Term: 1 << 33, Type: raftpb.EntryConfChangeV2, Data: []byte("x")},
		{Index: 300, Term: 7, Data: bytes.Repeat([]byte("v"), 127)},
		{Index: 301, Term: 7, Data: bytes.Repeat([]byte("v"), 128)},
		{Index: 302, Term: 7, Data: bytes.Repeat([]byte("v"), 1572864)},
	} {
		want, err := appendEntry([]byte("prefix"), &e)
		if err != nil {
			t.Fatal(err)
		}
		got := append(appendEntryHead([]byte("prefix"), &e), e.Data...)
		if !bytes.Equal(got, want) {
			t.Fatalf("entry %d with %d bytes of data: two pieces differ from appendEntry", e.Index, len(e.Data))
		}
	}
}

// TestLargeEntriesRoundTrip saves Readys that mix entries above and below
// largeDataBytes (more than one writev's worth of pieces among them) and
// reads the same entries back.
func TestLargeEntriesRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	var c syncCounter
	w := mustCreate(t, dir, Options{SyncFile: c.sync})
	var want []raftpb.Entry
	next := uint64(1)
	add := func(n, size int) []raftpb.Entry {
		var out []raftpb.Entry
		for range n {
			data := bytes.Repeat([]byte{byte(next)}, size+int(next%3))
			out = append(out, raftpb.Entry{Index: next, Term: 1, Data: data})
			next++
		}
		want = append(want, out...)
		return out
	}
	mixed := append(add(2, largeDataBytes), add(3, 10)...)
	mixed = append(mixed, add(1, 3*largeDataBytes)...)
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: 1}, mixed)
	// 600 large entries: 1,201 pieces, more than one writev takes.
	many := add(600, largeDataBytes)
	before := c.count()
	mustSave(t, w, raftpb.HardState{Term: 1, Vote: 1, Commit: next - 1}, many)
	if got := c.count() - before; got != 1 {
		t.Fatalf("a Save of 600 large entries made %d fsyncs, want 1", got)
	}
	mustClose(t, w)
	w, rec := mustOpen(t, dir, Options{})
	defer mustClose(t, w)
	entriesEqual(t, rec.Entries, want)
	if rec.HardState.Commit != next-1 {
		t.Fatalf("commit %d, want %d", rec.HardState.Commit, next-1)
	}
}

// TestWriteBuffersMoreThanIovMax writes more pieces than one writev takes,
// some of them empty, and reads them back in order.
func TestWriteBuffersMoreThanIovMax(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var bufs [][]byte
	var want []byte
	for i := range 2500 {
		b := bytes.Repeat([]byte{byte(i)}, i%5)
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	n, err := writeBuffersAt(f, bufs, 0)
	if err != nil || n != len(want) {
		t.Fatalf("writeBuffers: %d, %v; want %d bytes", n, err, len(want))
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the file is not the buffers in order")
	}
}
