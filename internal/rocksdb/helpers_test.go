package rocksdb

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// testOptions keeps memory small and memtables tiny, so that tests cross
// memtable switches, flushes and compactions instead of living in one
// memtable.
func testOptions(t testing.TB) Options {
	opts := DefaultOptions()
	opts.BlockCacheSize = 8 << 20
	opts.WriteBufferSize = minWriteBufferSize
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	return opts
}

func openTest(t testing.TB, dir string) *Backend {
	t.Helper()
	b, err := Open(dir, testOptions(t))
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return b
}

// newTestBackend opens a backend in a fresh directory, closed at cleanup.
func newTestBackend(t testing.TB) *Backend {
	t.Helper()
	b := openTest(t, t.TempDir())
	t.Cleanup(func() {
		if err := b.Close(); err != nil && err != ErrClosed {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

type kv struct{ key, value string }

func putAll(t testing.TB, b kvstore.Backend, kvs ...kv) {
	t.Helper()
	batch := b.NewBatch()
	for _, p := range kvs {
		batch.Put([]byte(p.key), []byte(p.value))
	}
	if err := batch.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// scan collects [start, end) of r in the given direction.
func scan(t testing.TB, r kvstore.Reader, start, end []byte, reverse bool) []kv {
	t.Helper()
	var out []kv
	fn := func(k, v []byte) bool {
		out = append(out, kv{string(k), string(v)})
		return true
	}
	var err error
	if reverse {
		err = r.Descend(start, end, fn)
	} else {
		err = r.Ascend(start, end, fn)
	}
	if err != nil {
		t.Fatalf("scan [%q, %q) reverse=%v: %v", start, end, reverse, err)
	}
	return out
}

// contents is everything in a fresh view of b.
func contents(t testing.TB, b kvstore.Backend) []kv {
	t.Helper()
	v := b.ReadView()
	defer v.Release()
	return scan(t, v, nil, nil, false)
}

func equalKVs(a, b []kv) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mustEqualKVs(t testing.TB, what string, got, want []kv) {
	t.Helper()
	if !equalKVs(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", what, fmtKVs(got), fmtKVs(want))
	}
}

func fmtKVs(kvs []kv) string {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, p := range kvs {
		if i > 0 {
			buf.WriteByte(' ')
		}
		fmt.Fprintf(&buf, "%q=%q", p.key, p.value)
	}
	buf.WriteByte(']')
	return buf.String()
}

func reversed(kvs []kv) []kv {
	out := make([]kv, len(kvs))
	for i, p := range kvs {
		out[len(kvs)-1-i] = p
	}
	return out
}

func mkdirFile(t testing.TB, dir, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t testing.TB, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// mustHaveEntries checks the exact set of names in dir.
func mustHaveEntries(t testing.TB, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds %q, want %q", dir, got, want)
	}
}
