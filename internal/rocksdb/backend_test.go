package rocksdb

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// sortedFixture is the content most tests start from, in key order; it
// includes an empty key, an empty value and bytes 0x00 and 0xff.
var sortedFixture = []kv{
	{"", "empty key"},
	{"\x00", "zero"},
	{"a", "1"},
	{"a\x00", "a-zero"},
	{"ab", ""},
	{"b", "2"},
	{"ba", "3"},
	{"c", "4"},
	{"\xff", "ff"},
	{"\xff\xff", "ffff"},
}

func fixtureBackend(t *testing.T) *Backend {
	b := newTestBackend(t)
	shuffled := slices.Clone(sortedFixture)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	putAll(t, b, shuffled[:5]...)
	putAll(t, b, shuffled[5:]...)
	return b
}

// filter returns the fixture entries in [start, end) (nil end: unbounded).
func filter(start, end []byte) []kv {
	var out []kv
	for _, p := range sortedFixture {
		if bytes.Compare([]byte(p.key), start) >= 0 && (end == nil || bytes.Compare([]byte(p.key), end) < 0) {
			out = append(out, p)
		}
	}
	return out
}

func TestAscendDescendRanges(t *testing.T) {
	b := fixtureBackend(t)
	v := b.ReadView()
	defer v.Release()
	cases := []struct {
		name       string
		start, end []byte
	}{
		{"everything", nil, nil},
		{"from empty key", []byte{}, nil},
		{"prefix a", []byte("a"), []byte("b")},
		{"single key", []byte("b"), []byte("b\x00")},
		{"between keys", []byte("bb"), []byte("bz")},
		{"from middle", []byte("b"), nil},
		{"up to middle", nil, []byte("b")},
		{"ff bound", []byte("c"), []byte("\xff\xff")},
		{"empty end is empty", []byte("a"), []byte{}},
		{"nil start empty end", nil, []byte{}},
		{"start equals end", []byte("b"), []byte("b")},
		{"inverted", []byte("c"), []byte("a")},
		{"past the end", []byte("\xff\xff\xff"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := filter(tc.start, tc.end)
			if tc.end != nil && bytes.Compare(tc.start, tc.end) >= 0 {
				want = nil
			}
			mustEqualKVs(t, "Ascend", scan(t, v, tc.start, tc.end, false), want)
			mustEqualKVs(t, "Descend", scan(t, v, tc.start, tc.end, true), reversed(want))
			var once []kv
			err := v.(kvstore.BulkReader).AscendOnce(tc.start, tc.end, func(k, val []byte) bool {
				once = append(once, kv{string(k), string(val)})
				return true
			})
			if err != nil {
				t.Fatalf("AscendOnce: %v", err)
			}
			mustEqualKVs(t, "AscendOnce", once, want)
		})
	}
}

func TestScanStopsWhenFnReturnsFalse(t *testing.T) {
	b := fixtureBackend(t)
	v := b.ReadView()
	defer v.Release()
	for _, reverse := range []bool{false, true} {
		var seen []string
		fn := func(k, _ []byte) bool {
			seen = append(seen, string(k))
			return len(seen) < 3
		}
		var err error
		if reverse {
			err = v.Descend(nil, nil, fn)
		} else {
			err = v.Ascend(nil, nil, fn)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"", "\x00", "a"}
		if reverse {
			want = []string{"\xff\xff", "\xff", "c"}
		}
		if !slices.Equal(seen, want) {
			t.Fatalf("reverse=%v: saw %q, want %q", reverse, seen, want)
		}
	}
}

func TestGet(t *testing.T) {
	b := fixtureBackend(t)
	v := b.ReadView()
	defer v.Release()
	for _, p := range sortedFixture {
		got, ok, err := v.Get([]byte(p.key))
		if err != nil || !ok || string(got) != p.value {
			t.Fatalf("Get(%q) = %q, %v, %v; want %q", p.key, got, ok, err, p.value)
		}
	}
	if got, ok, err := v.Get([]byte("ab")); err != nil || !ok || got == nil || len(got) != 0 {
		t.Fatalf("Get of an empty value = %q (nil=%v), %v, %v; want empty, true", got, got == nil, ok, err)
	}
	for _, k := range []string{"a\x01", "zz", "\xff\x00"} {
		if got, ok, err := v.Get([]byte(k)); err != nil || ok || got != nil {
			t.Fatalf("Get(%q) of a missing key = %q, %v, %v", k, got, ok, err)
		}
	}
}

func TestDeleteAndDeleteRange(t *testing.T) {
	cases := []struct {
		name  string
		apply func(bt interfaceBatch)
		want  []kv
	}{
		{
			name:  "delete one key and a missing key",
			apply: func(bt interfaceBatch) { bt.Delete([]byte("b")); bt.Delete([]byte("nope")) },
			want:  without(sortedFixture, "b"),
		},
		{
			name:  "bounded range",
			apply: func(bt interfaceBatch) { bt.DeleteRange([]byte("a"), []byte("b\x00")) },
			want:  without(sortedFixture, "a", "a\x00", "ab", "b"),
		},
		{
			name: "inverted and empty ranges delete nothing",
			apply: func(bt interfaceBatch) {
				bt.DeleteRange([]byte("c"), []byte("a"))
				bt.DeleteRange([]byte("b"), []byte("b"))
			},
			want: sortedFixture,
		},
		{
			name:  "unbounded range",
			apply: func(bt interfaceBatch) { bt.DeleteRange([]byte("c"), nil) },
			want:  without(sortedFixture, "c", "\xff", "\xff\xff"),
		},
		{
			name: "unbounded range reaches keys put earlier in the batch",
			apply: func(bt interfaceBatch) {
				bt.Put([]byte("\xff\xff\xff\xff"), []byte("x"))
				bt.DeleteRange([]byte("c"), nil)
			},
			want: without(sortedFixture, "c", "\xff", "\xff\xff"),
		},
		{
			name:  "everything",
			apply: func(bt interfaceBatch) { bt.DeleteRange(nil, nil) },
			want:  nil,
		},
		{
			name: "puts after a range delete in the same batch survive",
			apply: func(bt interfaceBatch) {
				bt.DeleteRange([]byte("a"), []byte("c"))
				bt.Put([]byte("b"), []byte("new"))
			},
			want: replace(without(sortedFixture, "a", "a\x00", "ab", "ba"), kv{"b", "new"}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := fixtureBackend(t)
			before := b.ReadView()
			defer before.Release()
			bt := b.NewBatch()
			tc.apply(bt)
			if err := bt.Commit(); err != nil {
				t.Fatal(err)
			}
			mustEqualKVs(t, "after commit", contents(t, b), tc.want)
			mustEqualKVs(t, "view taken before", scan(t, before, nil, nil, false), sortedFixture)
		})
	}
}

type interfaceBatch = interface {
	Put(k, v []byte)
	Delete(k []byte)
	DeleteRange(s, e []byte)
}

func without(kvs []kv, keys ...string) []kv {
	var out []kv
	for _, p := range kvs {
		if !slices.Contains(keys, p.key) {
			out = append(out, p)
		}
	}
	return out
}

func replace(kvs []kv, r kv) []kv {
	out := slices.Clone(kvs)
	for i := range out {
		if out[i].key == r.key {
			out[i] = r
		}
	}
	return out
}

func TestUnboundedDeleteRangeOnEmptyDatabase(t *testing.T) {
	b := newTestBackend(t)
	bt := b.NewBatch()
	bt.DeleteRange(nil, nil)
	bt.Put([]byte(""), []byte("v"))
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	bt = b.NewBatch()
	bt.Put([]byte(""), []byte("w")) // the empty key is the largest put
	bt.DeleteRange(nil, nil)
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	mustEqualKVs(t, "content", contents(t, b), nil)
}

func TestBatchLifecycle(t *testing.T) {
	b := newTestBackend(t)
	bt := b.NewBatch()
	if bt.Len() != 0 {
		t.Fatalf("new batch Len = %d", bt.Len())
	}
	bt.Put([]byte("k"), []byte("v"))
	bt.Delete([]byte("x"))
	bt.DeleteRange([]byte("m"), []byte("n"))
	bt.DeleteRange([]byte("n"), []byte("m"))
	if bt.Len() != 4 {
		t.Fatalf("Len = %d, want 4", bt.Len())
	}
	// The batch copies: reusing the caller's slices changes nothing.
	key, val := []byte("k2"), []byte("v2")
	bt.Put(key, val)
	copy(key, "zz")
	copy(val, "zz")
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := bt.Commit(); !errors.Is(err, errBatchDone) {
		t.Fatalf("second Commit = %v, want errBatchDone", err)
	}
	mustEqualKVs(t, "content", contents(t, b), []kv{{"k", "v"}, {"k2", "v2"}})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Put after Commit did not panic")
			}
		}()
		bt.Put([]byte("a"), nil)
	}()
	if err := b.NewBatch().Commit(); err != nil {
		t.Fatalf("empty Commit: %v", err)
	}
}

func TestReadViewIsolation(t *testing.T) {
	b := fixtureBackend(t)
	old := b.ReadView()
	defer old.Release()
	bt := b.NewBatch()
	bt.Put([]byte("a"), []byte("changed"))
	bt.Put([]byte("new"), []byte("n"))
	bt.Delete([]byte("b"))
	bt.DeleteRange([]byte("\xff"), nil)
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	mustEqualKVs(t, "old view Ascend", scan(t, old, nil, nil, false), sortedFixture)
	mustEqualKVs(t, "old view Descend", scan(t, old, nil, nil, true), reversed(sortedFixture))
	if v, ok, _ := old.Get([]byte("a")); !ok || string(v) != "1" {
		t.Fatalf("old view Get(a) = %q, %v", v, ok)
	}
	if _, ok, _ := old.Get([]byte("new")); ok {
		t.Fatal("old view sees a later Put")
	}
	want := replace(without(sortedFixture, "b", "\xff", "\xff\xff"), kv{"a", "changed"})
	want = append(want, kv{"new", "n"})
	mustEqualKVs(t, "new view", contents(t, b), want)

	old.Release()
	old.Release() // second Release is a no-op
	if _, _, err := old.Get([]byte("a")); !errors.Is(err, errReleased) {
		t.Fatalf("Get after Release = %v", err)
	}
}

func TestReopenKeepsContent(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	putAll(t, b, sortedFixture...)
	bt := b.NewBatch()
	bt.Delete([]byte("a"))
	bt.DeleteRange([]byte("b"), []byte("c"))
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	want := without(sortedFixture, "a", "b", "ba")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	b = openTest(t, dir)
	defer b.Close()
	mustEqualKVs(t, "after reopen", contents(t, b), want)
}

func TestOpenRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	putAll(t, b, kv{"k", "v"})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// What a Restore killed before switching ACTIVE leaves behind.
	for _, name := range []string{dbName(2), dbName(2) + stagingSuffix} {
		mkdirFile(t, dir, name)
	}
	writeFile(t, dir, activeTmpFile, dbName(2)+"\n")
	writeFile(t, dir, "unrelated", "keep me")
	b = openTest(t, dir)
	defer b.Close()
	mustEqualKVs(t, "content", contents(t, b), []kv{{"k", "v"}})
	mustHaveEntries(t, dir, activeFile, lockFile, dbName(1), "unrelated")
}

func TestOpenFreshIgnoresDatabaseWithoutActive(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	putAll(t, b, kv{"k", "v"})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// A first Open killed before writing ACTIVE: nothing was committed.
	removeFile(t, dir, activeFile)
	b = openTest(t, dir)
	defer b.Close()
	mustEqualKVs(t, "content", contents(t, b), nil)
}

func TestOpenMissingActiveDatabaseFails(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, activeFile, dbName(7)+"\n")
	if b, err := Open(dir, testOptions(t)); err == nil {
		b.Close()
		t.Fatal("Open with ACTIVE naming a missing database succeeded")
	}
	writeFile(t, dir, activeFile, "garbage\n")
	if b, err := Open(dir, testOptions(t)); err == nil || !strings.Contains(err.Error(), activeFile) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("Open with garbage ACTIVE = %v", err)
	}
}

func TestSecondOpenIsLockedOut(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	defer b.Close()
	if b2, err := Open(dir, testOptions(t)); err == nil {
		b2.Close()
		t.Fatal("second Open of the same directory succeeded")
	}
}

func TestClose(t *testing.T) {
	b := openTest(t, t.TempDir())
	putAll(t, b, kv{"k", "v"})
	v := b.ReadView()
	if err := b.Close(); err == nil {
		t.Fatal("Close with an open view reported no error")
	}
	// The view still works: its database closes with it.
	if got, ok, err := v.Get([]byte("k")); err != nil || !ok || string(got) != "v" {
		t.Fatalf("Get on a view outliving Close = %q, %v, %v", got, ok, err)
	}
	v.Release()
	if err := b.NewBatch().Commit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Commit after Close = %v", err)
	}
	v = b.ReadView()
	if _, _, err := v.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get on a view of a closed backend = %v", err)
	}
	v.Release()
	for name, err := range map[string]error{
		"Sync":       b.Sync(),
		"Compact":    b.Compact(),
		"Checkpoint": b.Checkpoint(t.TempDir() + "/cp"),
		"Restore":    b.Restore(strings.NewReader("")),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v", name, err)
		}
	}
	if b.Size() != 0 || b.SizeInUse() != 0 {
		t.Errorf("sizes after Close = %d, %d", b.Size(), b.SizeInUse())
	}
}
