package linearizability

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/raftnode/wal"
	"github.com/metastore-io/metastore/test/framework"
)

// TestTornMetastoreTailIsDropped holds every shape tearWALTail appends to
// a MetaStore segment, preallocated or not, against internal/raftnode/wal: Open
// warns, cuts the torn record off and recovers every entry, so the fault
// damages nothing that was written whole.
func TestTornMetastoreTailIsDropped(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	shapes := map[string]bool{}
	for i := range 60 {
		dataDir := t.TempDir()
		dir := filepath.Join(dataDir, walSubdir)
		// Half preallocated, as members write it, half without a reserve
		// (a segment cut back to its records).
		opts := wal.Options{Preallocate: i%2 == 0, SegmentSizeBytes: 64 << 10}
		w, err := wal.Create(dir, wal.Metadata{MemberID: 1, ClusterID: 2}, opts)
		if err != nil {
			t.Fatal(err)
		}
		var ents []raftpb.Entry
		for j := range 1 + i%5 {
			ents = append(ents, raftpb.Entry{Term: 1, Index: uint64(j + 1), Data: bytes.Repeat([]byte{'v'}, 10+j*100)})
		}
		if err := w.Save(raftpb.HardState{Term: 1, Commit: uint64(len(ents))}, ents); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		seg, err := newestWALSegment(dataDir)
		if err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		what, err := tearWALTail(framework.TargetMetaStore, dataDir, rng)
		if err != nil {
			t.Fatal(err)
		}
		shapes[strings.Join(strings.Fields(what)[1:3], " ")] = true

		var logged bytes.Buffer
		opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		w, rec, err := wal.Open(dir, opts)
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logged.String(), metastoreTornTailLog) {
			t.Errorf("%s: no %q in the log: %s", what, metastoreTornTailLog, logged.String())
		}
		if len(rec.Entries) != len(ents) {
			t.Errorf("%s: recovered %d entries, want %d", what, len(rec.Entries), len(ents))
		}
		after, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		// Open cuts the segment at its last record: what was before
		// the tear up to there is unchanged.
		records, err := metastoreDataEnd(before)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) < records || !bytes.Equal(after[:records], before[:records]) || len(bytes.Trim(after[records:], "\x00")) > 0 {
			t.Errorf("%s: the segment's %d bytes of records differ after recovery, or non-zero bytes follow them", what, records)
		}
	}
	if len(shapes) < 4 {
		t.Errorf("60 tears made only the shapes %v", shapes)
	}
}

// TestTornEtcdTail checks the etcd tear against etcd's rules on a
// preallocated segment: it writes after the last frame only, and the
// torn frame's last written byte ends a sector while the frame runs on
// into zeros (what etcd's decoder repairs as a torn write).
func TestTornEtcdTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 60 {
		dataDir := t.TempDir()
		dir := filepath.Join(dataDir, walSubdir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		// Some whole frames, then preallocated zeros.
		var seg []byte
		for range 1 + rng.IntN(6) {
			seg = append(seg, etcdFrame(entryPayload(rng), rng.Uint32())...)
		}
		end := len(seg)
		seg = append(seg, make([]byte, 64<<10)...)
		path := filepath.Join(dir, "0000000000000000-0000000000000000.wal")
		if err := os.WriteFile(path, seg, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := etcdDataEnd(seg); err != nil || got != end {
			t.Fatalf("etcdDataEnd = %d, %v; want %d", got, err, end)
		}
		what, err := tearWALTail(framework.TargetEtcd, dataDir, rng)
		if err != nil {
			t.Fatal(err)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(after[:end], seg[:end]) || len(after) != len(seg) {
			t.Fatalf("%s: changed bytes before the end of the frames, or the size", what)
		}
		written := len(bytes.TrimRight(after[end:], "\x00"))
		if written == 0 {
			t.Fatalf("%s: wrote nothing", what)
		}
		// The crash kept whole sectors: the first one the frame touches
		// up to some boundary, and the frame runs on past it.
		boundary := (end + written + sectorSize - 1) / sectorSize * sectorSize
		if written >= etcdHeaderSize {
			l := binary.LittleEndian.Uint64(after[end:])
			frameEnd := end + etcdHeaderSize + int(l&^(uint64(0xff)<<56)) + int(l>>56&7)
			if frameEnd <= boundary {
				t.Fatalf("%s: the frame ends at %d, within its written sectors (up to %d): not torn", what, frameEnd, boundary)
			}
		}
	}
}
