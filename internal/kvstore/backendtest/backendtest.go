package backendtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// Run runs the conformance suite. newBackend returns a new, empty backend
// and registers its own cleanup (Close) with t; the suite releases every
// ReadView it takes before its test returns.
func Run(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b kvstore.Backend, newBackend func(t *testing.T) kvstore.Backend)
	}{
		{"Empty", testEmpty},
		{"PutGetOverwrite", testPutGetOverwrite},
		{"RandomOrder", testRandomOrder},
		{"AscendDescendBounds", testAscendDescendBounds},
		{"ScanStops", testScanStops},
		{"Deletes", testDeletes},
		{"BatchOrder", testBatchOrder},
		{"BatchCopiesInput", testBatchCopiesInput},
		{"ReadViewIsolation", testReadViewIsolation},
		{"ConcurrentReaders", testConcurrentReaders},
		{"SnapshotRoundTrip", testSnapshotRoundTrip},
		{"SnapshotWhileWriting", testSnapshotWhileWriting},
		{"RestoreReplaces", testRestoreReplaces},
		{"RestoreRejectsGarbage", testRestoreRejectsGarbage},
		{"Sizes", testSizes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newBackend(t), newBackend)
		})
	}
}

// pair is one key/value as the tests model content.
type pair struct{ key, value string }

func (p pair) String() string { return fmt.Sprintf("%q=%q", p.key, p.value) }

// model is the expected content of a backend.
type model map[string]string

func (m model) sorted() []pair {
	out := make([]pair, 0, len(m))
	for k, v := range m {
		out = append(out, pair{k, v})
	}
	slices.SortFunc(out, func(a, b pair) int { return bytes.Compare([]byte(a.key), []byte(b.key)) })
	return out
}

// op is one batch operation, applied both to a Batch and to a model.
type op struct {
	kind       byte // 'p' put, 'd' delete, 'r' delete range
	key, arg   string
	unboundEnd bool // for 'r': nil end
}

func put(k, v string) op      { return op{kind: 'p', key: k, arg: v} }
func del(k string) op         { return op{kind: 'd', key: k} }
func delRange(s, e string) op { return op{kind: 'r', key: s, arg: e} }
func delFrom(s string) op     { return op{kind: 'r', key: s, unboundEnd: true} }
func (o op) end() []byte      { return endBytes(o.arg, o.unboundEnd) }
func endBytes(e string, unbound bool) []byte {
	if unbound {
		return nil
	}
	return []byte(e)
}

func (m model) apply(ops ...op) {
	for _, o := range ops {
		switch o.kind {
		case 'p':
			m[o.key] = o.arg
		case 'd':
			delete(m, o.key)
		case 'r':
			for k := range m {
				if k >= o.key && (o.unboundEnd || k < o.arg) {
					delete(m, k)
				}
			}
		}
	}
}

// commit applies ops to b in one batch and to m.
func commit(t *testing.T, b kvstore.Backend, m model, ops ...op) {
	t.Helper()
	bt := b.NewBatch()
	for _, o := range ops {
		switch o.kind {
		case 'p':
			bt.Put([]byte(o.key), []byte(o.arg))
		case 'd':
			bt.Delete([]byte(o.key))
		case 'r':
			bt.DeleteRange([]byte(o.key), o.end())
		}
	}
	if bt.Len() != len(ops) {
		t.Fatalf("batch Len = %d after %d operations", bt.Len(), len(ops))
	}
	if err := bt.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if m != nil {
		m.apply(ops...)
	}
}

// scan returns what Ascend (or Descend) yields for [start, end).
func scan(t *testing.T, r kvstore.Reader, start, end []byte, descend bool) []pair {
	t.Helper()
	var out []pair
	fn := func(k, v []byte) bool {
		out = append(out, pair{string(k), string(v)})
		return true
	}
	var err error
	if descend {
		err = r.Descend(start, end, fn)
	} else {
		err = r.Ascend(start, end, fn)
	}
	if err != nil {
		t.Fatalf("scan [%q, %q): %v", start, end, err)
	}
	return out
}

// checkContent verifies that a view of b holds exactly m, through Ascend,
// Descend and Get.
func checkContent(t *testing.T, b kvstore.Backend, m model) {
	t.Helper()
	v := b.ReadView()
	defer v.Release()
	checkReader(t, v, m)
}

func checkReader(t *testing.T, r kvstore.Reader, m model) {
	t.Helper()
	want := m.sorted()
	if got := scan(t, r, nil, nil, false); !slices.Equal(got, want) {
		t.Fatalf("Ascend(nil, nil):\n got %v\nwant %v", got, want)
	}
	slices.Reverse(want)
	if got := scan(t, r, nil, nil, true); !slices.Equal(got, want) {
		t.Fatalf("Descend(nil, nil):\n got %v\nwant %v", got, want)
	}
	for k, v := range m {
		got, ok, err := r.Get([]byte(k))
		if err != nil || !ok || string(got) != v {
			t.Fatalf("Get(%q) = %q, %v, %v; want %q", k, got, ok, err, v)
		}
	}
}

func mustMissing(t *testing.T, r kvstore.Reader, key string) {
	t.Helper()
	if v, ok, err := r.Get([]byte(key)); err != nil || ok {
		t.Fatalf("Get(%q) = %q, %v, %v; want missing", key, v, ok, err)
	}
}

func testEmpty(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	checkContent(t, b, model{})
	v := b.ReadView()
	defer v.Release()
	mustMissing(t, v, "a")
	mustMissing(t, v, "")
	var w bytes.Buffer
	if _, err := v.WriteTo(&w); err != nil {
		t.Fatalf("WriteTo of an empty view: %v", err)
	}
	if err := b.Restore(&w); err != nil {
		t.Fatalf("Restore of an empty image: %v", err)
	}
	checkContent(t, b, model{})
}

func testPutGetOverwrite(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	m := model{}
	commit(t, b, m, put("a", "1"), put("b", ""), put("", "empty key"), put("c", "3"))
	checkContent(t, b, m)
	commit(t, b, m, put("a", "one"), put("a", "uno")) // last write in a batch wins
	commit(t, b, m, put("c", ""))
	checkContent(t, b, m)
	v := b.ReadView()
	defer v.Release()
	mustMissing(t, v, "a\x00")
	mustMissing(t, v, "bb")
	got, ok, err := v.Get([]byte("b"))
	if err != nil || !ok || len(got) != 0 {
		t.Fatalf("Get of an empty value = %q, %v, %v", got, ok, err)
	}
}

func testRandomOrder(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := model{}
	for range 20 {
		var ops []op
		for range 50 {
			k := make([]byte, 1+rng.IntN(6))
			for i := range k {
				k[i] = byte(rng.IntN(4)) * 0x55 // 0x00, 0x55, 0xaa, 0xff
			}
			if rng.IntN(5) == 0 {
				ops = append(ops, del(string(k)))
			} else {
				ops = append(ops, put(string(k), fmt.Sprint(rng.Uint64())))
			}
		}
		commit(t, b, m, ops...)
	}
	checkContent(t, b, m)
}

// boundKeys are the keys and bounds of the range tests: every interesting
// position relative to each other in byte order.
var boundKeys = []string{"", "\x00", "\x00\x00", "a", "a\x00", "aa", "ab", "b", "ba", "\xfe", "\xff", "\xff\xff"}

func testAscendDescendBounds(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	m := model{}
	var ops []op
	for i, k := range boundKeys {
		if i%3 != 2 { // leave some bounds absent
			ops = append(ops, put(k, "v"+k))
		}
	}
	commit(t, b, m, ops...)
	v := b.ReadView()
	defer v.Release()
	all := m.sorted()
	bounds := append([]string{"zz"}, boundKeys...)
	for _, s := range bounds {
		for _, e := range bounds {
			for _, unbound := range []bool{false, true} {
				start, end := []byte(s), endBytes(e, unbound)
				var want []pair
				for _, p := range all {
					if p.key >= s && (unbound || p.key < e) {
						want = append(want, p)
					}
				}
				if got := scan(t, v, start, end, false); !slices.Equal(got, want) {
					t.Fatalf("Ascend(%q, %q):\n got %v\nwant %v", start, end, got, want)
				}
				slices.Reverse(want)
				if got := scan(t, v, start, end, true); !slices.Equal(got, want) {
					t.Fatalf("Descend(%q, %q):\n got %v\nwant %v", start, end, got, want)
				}
			}
		}
	}
}

func testScanStops(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	m := model{}
	commit(t, b, m, put("a", "1"), put("b", "2"), put("c", "3"), put("d", "4"))
	v := b.ReadView()
	defer v.Release()
	for _, descend := range []bool{false, true} {
		var seen []string
		fn := func(k, _ []byte) bool {
			seen = append(seen, string(k))
			return len(seen) < 2
		}
		var err error
		if descend {
			err = v.Descend(nil, nil, fn)
		} else {
			err = v.Ascend(nil, nil, fn)
		}
		want := []string{"a", "b"}
		if descend {
			want = []string{"d", "c"}
		}
		if err != nil || !slices.Equal(seen, want) {
			t.Fatalf("descend=%v: scan stopping after 2 saw %q (err %v), want %q", descend, seen, err, want)
		}
	}
}

func testDeletes(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	m := model{}
	var ops []op
	for _, k := range boundKeys {
		ops = append(ops, put(k, "v"))
	}
	ops = append(ops, put("c", "v"), put("d", "v"), put("e", "v"))
	commit(t, b, m, ops...)
	steps := [][]op{
		{del("a"), del("missing")},
		{delRange("c", "a"), delRange("b", "b")}, // inverted and empty: no-ops
		{delRange("a", "b")},
		{delRange("\x00", "\x00\x00")},
		{delFrom("d")},
		{delRange("b", "c\x00")},
		{delRange("", "")},
		{delFrom("")},
	}
	for i, step := range steps {
		commit(t, b, m, step...)
		checkContent(t, b, m)
		if i == len(steps)-1 && len(m) != 0 {
			t.Fatalf("model not empty after deleting everything: %v", m)
		}
	}
	// An unbounded delete also removes what the same batch put before it.
	commit(t, b, m, put("x", "1"), put("\xff\xff\xff", "2"), delFrom(""))
	checkContent(t, b, m)
}

func testBatchOrder(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	m := model{}
	commit(t, b, m, put("a", "1"), del("a"), del("b"), put("b", "2"),
		put("c", "3"), delRange("c", "d"), delRange("e", "f"), put("e", "5"),
		put("g", "6"), delFrom("g"), put("h", "7"))
	want := model{"b": "2", "e": "5", "h": "7"}
	if !mapsEqual(m, want) {
		t.Fatalf("model %v, want %v", m, want)
	}
	checkContent(t, b, m)
}

func mapsEqual(a, b model) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func testBatchCopiesInput(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	key, value, end := []byte("k1"), []byte("v1"), []byte("z")
	bt := b.NewBatch()
	bt.Put(key, value)
	key[1], value[1] = '2', '2'
	bt.Put(key, value)
	start := []byte("k2")
	bt.DeleteRange(start, end)
	start[1], end[0] = '0', '0' // must not widen or move the range
	owned := []byte("k3")
	bt.PutOwned(owned, []byte("v3")) // the key is copied, the value handed over
	owned[1] = '4'
	if err := bt.Commit(); err != nil {
		t.Fatal(err)
	}
	checkContent(t, b, model{"k1": "v1", "k3": "v3"})
}

func testReadViewIsolation(t *testing.T, b kvstore.Backend, _ func(*testing.T) kvstore.Backend) {
	m := model{}
	commit(t, b, m, put("a", "1"), put("b", "2"), put("c", "3"))
	before := model{}
	before.apply(put("a", "1"), put("b", "2"), put("c", "3"))
	v := b.ReadView()
	defer v.Release()
	commit(t, b, m, put("a", "changed"), del("b"), put("d", "4"))
	v2 := b.ReadView()
	commit(t, b, m, delFrom(""), put("e", "5"))
	checkReader(t, v, before)
	checkReader(t, v2, model{"a": "changed", "c": "3", "d": "4"})
	checkContent(t, b, m)
	v2.Release() // releasing one view leaves the others intact
	checkReader(t, v, before)
}
