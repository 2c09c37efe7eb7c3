package memory_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
)

func commitPairs(t testing.TB, b kvstore.Backend, kv ...string) {
	t.Helper()
	bt := b.NewBatch()
	for i := 0; i < len(kv); i += 2 {
		bt.Put([]byte(kv[i]), []byte(kv[i+1]))
	}
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
}

func imageOf(t testing.TB, b kvstore.Backend) []byte {
	t.Helper()
	v := b.ReadView()
	defer v.Release()
	var buf bytes.Buffer
	if _, err := v.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func contents(t testing.TB, b kvstore.Backend) map[string]string {
	t.Helper()
	v := b.ReadView()
	defer v.Release()
	m := map[string]string{}
	if err := v.Ascend(nil, nil, func(k, v []byte) bool { m[string(k)] = string(v); return true }); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSnapshotFormat pins the magic and version of this engine's images
// (internal/format/kvimage pins the framing).
func TestSnapshotFormat(t *testing.T) {
	b := memory.New()
	commitPairs(t, b, "a", "xy")
	want := []byte("MSMEMSNP\x00\x02\x01\x01a\x02xy\x02\x00\x00\x00\x00\x00\x00\x00\x01")
	want = binary.BigEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if got := imageOf(t, b); !bytes.Equal(got, want) {
		t.Fatalf("image\n got %x\nwant %x", got, want)
	}
}

// TestRestoreDetectsEveryCorruption flips each bit of an image, cuts it
// at every length and appends a byte: Restore must refuse all of them and
// keep the old content.
func TestRestoreDetectsEveryCorruption(t *testing.T) {
	src := memory.New()
	commitPairs(t, src, "alpha", "1", "beta", "", "gamma", "333")
	img := imageOf(t, src)
	b := memory.New()
	commitPairs(t, b, "old", "content")
	check := func(what string, data []byte) {
		t.Helper()
		err := b.Restore(bytes.NewReader(data))
		if err == nil {
			t.Fatalf("Restore accepted an image with %s", what)
		}
		if !errors.Is(err, memory.ErrCorruptSnapshot) {
			t.Fatalf("Restore of an image with %s: %v does not wrap ErrCorruptSnapshot", what, err)
		}
		if got := contents(t, b); len(got) != 1 || got["old"] != "content" {
			t.Fatalf("content after a failed Restore (%s): %v", what, got)
		}
	}
	for i := range img {
		for bit := range 8 {
			bad := bytes.Clone(img)
			bad[i] ^= 1 << bit
			check("a flipped bit", bad)
		}
	}
	for n := range img {
		check("a truncation", img[:n])
	}
	check("trailing data", append(bytes.Clone(img), 0))
	if err := b.Restore(bytes.NewReader(img)); err != nil {
		t.Fatalf("Restore of the intact image: %v", err)
	}
}

func TestSizeCountsKeysAndValues(t *testing.T) {
	b := memory.New()
	steps := []struct {
		ops  func(bt kvstore.Batch)
		size int64
	}{
		{func(bt kvstore.Batch) { bt.Put([]byte("ab"), []byte("123")) }, 5},
		{func(bt kvstore.Batch) { bt.Put([]byte("ab"), []byte("1")) }, 3},
		{func(bt kvstore.Batch) { bt.Put([]byte("c"), nil); bt.Put([]byte("dd"), []byte("dd")) }, 8},
		{func(bt kvstore.Batch) { bt.Delete([]byte("missing")); bt.Delete([]byte("c")) }, 7},
		{func(bt kvstore.Batch) { bt.DeleteRange([]byte("a"), []byte("d")) }, 4},
		{func(bt kvstore.Batch) { bt.DeleteRange(nil, nil) }, 0},
	}
	for i, st := range steps {
		bt := b.NewBatch()
		st.ops(bt)
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		if b.Size() != st.size || b.SizeInUse() != st.size {
			t.Fatalf("step %d: Size %d SizeInUse %d, want %d", i, b.Size(), b.SizeInUse(), st.size)
		}
	}
	commitPairs(t, b, "k", "vv")
	img := imageOf(t, b)
	other := memory.New()
	if err := other.Restore(bytes.NewReader(img)); err != nil {
		t.Fatal(err)
	}
	if other.Size() != 3 {
		t.Fatalf("Size after Restore %d, want 3", other.Size())
	}
}

func TestClosedBackend(t *testing.T) {
	b := memory.New()
	commitPairs(t, b, "a", "1")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.NewBatch().Commit(); !errors.Is(err, memory.ErrClosed) {
		t.Fatalf("commit after close: %v", err)
	}
	v := b.ReadView()
	if _, _, err := v.Get([]byte("a")); !errors.Is(err, memory.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if err := b.Restore(bytes.NewReader(nil)); !errors.Is(err, memory.ErrClosed) {
		t.Fatalf("restore after close: %v", err)
	}
}

func TestReleasedView(t *testing.T) {
	b := memory.New()
	v := b.ReadView()
	v.Release()
	if err := v.Ascend(nil, nil, func(k, v []byte) bool { return true }); !errors.Is(err, memory.ErrReleased) {
		t.Fatalf("scan of a released view: %v", err)
	}
}

// FuzzRestore feeds arbitrary bytes to Restore. Whatever it gets, Restore
// either refuses (keeping the old content) or accepts an image that then
// round-trips through WriteTo unchanged in content.
func FuzzRestore(f *testing.F) {
	src := memory.New()
	f.Add(imageOf(f, src))
	commitPairs(f, src, "a", "xy")
	f.Add(imageOf(f, src))
	commitPairs(f, src, "\x00", "", "b", string(bytes.Repeat([]byte{0xff}, 200)), "c\xff", "v")
	img := imageOf(f, src)
	f.Add(img)
	f.Add(img[:len(img)/2])
	f.Add([]byte("MSMEMSNP"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := memory.New()
		commitPairs(t, b, "old", "content")
		if err := b.Restore(bytes.NewReader(data)); err != nil {
			if got := contents(t, b); len(got) != 1 || got["old"] != "content" {
				t.Fatalf("content after a failed Restore: %v", got)
			}
			return
		}
		restored := contents(t, b)
		other := memory.New()
		if err := other.Restore(bytes.NewReader(imageOf(t, b))); err != nil {
			t.Fatalf("image of a restored backend does not restore: %v", err)
		}
		again := contents(t, other)
		if len(again) != len(restored) {
			t.Fatalf("round trip: %d keys, then %d", len(restored), len(again))
		}
		for k, v := range restored {
			if again[k] != v {
				t.Fatalf("round trip: %q = %q, then %q", k, v, again[k])
			}
		}
	})
}
