package rocksdb

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// bigContent is enough data to span several memtables and, with the test
// write buffer size, several SST files in a restore.
func bigContent(n int) []kv {
	out := make([]kv, n)
	for i := range out {
		out[i] = kv{fmt.Sprintf("r%08d", i), fmt.Sprintf("value-%d-%s", i, bytes.Repeat([]byte{'x'}, i%300))}
	}
	return out
}

func image(t testing.TB, b *Backend) []byte {
	t.Helper()
	v := b.ReadView()
	defer v.Release()
	var buf bytes.Buffer
	n, err := v.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	return buf.Bytes()
}

func TestWriteToRestoreRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content []kv
	}{
		{"empty", nil},
		{"fixture", sortedFixture},
		{"several SST files", bigContent(3000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newTestBackend(t)
			for i := 0; i < len(tc.content); i += 500 {
				putAll(t, src, tc.content[i:min(i+500, len(tc.content))]...)
			}
			img := image(t, src)

			dir := t.TempDir()
			dst := openTest(t, dir)
			putAll(t, dst, kv{"only-in-old", "x"}, kv{"r00000001", "old"})
			before := dst.ReadView()
			if err := dst.Restore(bytes.NewReader(img)); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			mustEqualKVs(t, "restored", contents(t, dst), tc.content)
			if !bytes.Equal(image(t, dst), img) {
				t.Fatal("image of the restored backend differs from the source image")
			}
			// A view taken before Restore keeps the old content, and the
			// old database stays on disk until it is released.
			mustEqualKVs(t, "view from before", scan(t, before, nil, nil, false), []kv{{"only-in-old", "x"}, {"r00000001", "old"}})
			mustHaveEntries(t, dir, activeFile, lockFile, dbName(1), dbName(2))
			before.Release()
			mustHaveEntries(t, dir, activeFile, lockFile, dbName(2))

			// Writes go to the restored database and survive reopening.
			putAll(t, dst, kv{"after", "restore"})
			if err := dst.Close(); err != nil {
				t.Fatal(err)
			}
			dst = openTest(t, dir)
			defer dst.Close()
			want := append(append([]kv(nil), tc.content...), kv{"after", "restore"})
			sortKVs(want)
			mustEqualKVs(t, "reopened", contents(t, dst), want)
		})
	}
}

// TestWriteToWhileCommitting streams an image from a view while the
// writer keeps changing the database: the image is the view's.
func TestWriteToWhileCommitting(t *testing.T) {
	b := newTestBackend(t)
	content := bigContent(2000)
	putAll(t, b, content...)
	v := b.ReadView()
	defer v.Release()
	errc := make(chan error, 1)
	var buf bytes.Buffer
	go func() {
		_, err := v.WriteTo(&buf)
		errc <- err
	}()
	for i := range 50 {
		bt := b.NewBatch()
		bt.DeleteRange([]byte(fmt.Sprintf("r%08d", i*40)), []byte(fmt.Sprintf("r%08d", i*40+20)))
		bt.Put([]byte(fmt.Sprintf("s%d", i)), []byte("new"))
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	dst := newTestBackend(t)
	if err := dst.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	mustEqualKVs(t, "restored", contents(t, dst), content)
}

func sortKVs(kvs []kv) {
	for i := 1; i < len(kvs); i++ {
		for j := i; j > 0 && kvs[j].key < kvs[j-1].key; j-- {
			kvs[j], kvs[j-1] = kvs[j-1], kvs[j]
		}
	}
}

func TestRestoreOfBadImageKeepsContent(t *testing.T) {
	src := newTestBackend(t)
	putAll(t, src, sortedFixture...)
	good := image(t, src)

	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	unordered := encodeImage(t, []kv{{"b", "1"}, {"a", "2"}})
	duplicate := encodeImage(t, []kv{{"a", "1"}, {"a", "2"}})
	duplicateEmpty := encodeImage(t, []kv{{"", "1"}, {"", "2"}})
	badCount := bytes.Clone(encodeImage(t, []kv{{"a", "1"}}))
	badCount[len(badCount)-5]++ // count 1 -> 2, CRC now wrong as well

	cases := map[string][]byte{
		"empty":              nil,
		"bad magic":          append([]byte("NOTROCKS"), good[8:]...),
		"future version":     append(append([]byte(imageFormat.Magic), 0, 9), good[10:]...),
		"flipped byte":       flipped,
		"trailing byte":      append(bytes.Clone(good), 0),
		"unordered keys":     unordered,
		"duplicate keys":     duplicate,
		"duplicate empty":    duplicateEmpty,
		"wrong count":        badCount,
		"unknown tag":        append(bytes.Clone(good[:10]), 0x7f),
		"header only":        good[:10],
		"truncated trailer":  good[:len(good)-1],
		"truncated in value": good[:len(good)/2],
	}
	for name, img := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			b := openTest(t, dir)
			defer b.Close()
			putAll(t, b, kv{"keep", "me"})
			err := b.Restore(bytes.NewReader(img))
			if !errors.Is(err, ErrBadImage) {
				t.Fatalf("Restore = %v, want ErrBadImage", err)
			}
			mustEqualKVs(t, "content after failed Restore", contents(t, b), []kv{{"keep", "me"}})
			mustHaveEntries(t, dir, activeFile, lockFile, dbName(1))
		})
	}

	t.Run("reader error", func(t *testing.T) {
		b := newTestBackend(t)
		putAll(t, b, kv{"keep", "me"})
		boom := errors.New("boom")
		err := b.Restore(&failingReader{data: good[:20], err: boom})
		if !errors.Is(err, boom) {
			t.Fatalf("Restore = %v, want boom", err)
		}
		mustEqualKVs(t, "content", contents(t, b), []kv{{"keep", "me"}})
	})

	// Every prefix of a multi-file image fails, never installs.
	t.Run("every truncation", func(t *testing.T) {
		b := newTestBackend(t)
		putAll(t, b, kv{"keep", "me"})
		for cut := 0; cut < len(good); cut++ {
			if err := b.Restore(bytes.NewReader(good[:cut])); !errors.Is(err, ErrBadImage) {
				t.Fatalf("Restore of %d/%d bytes = %v", cut, len(good), err)
			}
		}
		mustEqualKVs(t, "content", contents(t, b), []kv{{"keep", "me"}})
	})
}

type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestRestoreClearsLeftovers: what an earlier Restore killed halfway left
// under the next generation's names does not stop the next one.
func TestRestoreClearsLeftovers(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	defer b.Close()
	putAll(t, b, kv{"keep", "me"})
	writeFile(t, dir, dbName(2), "not a directory")
	mkdirFile(t, dir, dbName(2)+stagingSuffix)
	if err := b.Restore(bytes.NewReader(encodeImage(t, []kv{{"a", "1"}}))); err != nil {
		t.Fatalf("Restore over leftovers: %v", err)
	}
	mustEqualKVs(t, "content", contents(t, b), []kv{{"a", "1"}})
	mustHaveEntries(t, dir, activeFile, lockFile, dbName(2))
}

func TestCheckpoint(t *testing.T) {
	b := newTestBackend(t)
	content := bigContent(500)
	putAll(t, b, content...)
	cp := filepath.Join(t.TempDir(), "cp")
	if err := b.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	putAll(t, b, kv{"later", "x"})
	if err := b.Checkpoint(cp); err == nil {
		t.Fatal("Checkpoint into an existing directory succeeded")
	}
	c := openTest(t, cp)
	defer c.Close()
	mustEqualKVs(t, "checkpoint", contents(t, c), content)
}
