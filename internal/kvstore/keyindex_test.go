package kvstore

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"unsafe"
)

func rv(main int64) revision { return revision{main: main} }

// testHistory is the history of key "foo" most tests use:
//
//	generation 0: put 2, put 4, delete 6
//	generation 1: put 8, put 10, delete 12
//	generation 2: put 14, put 15.1, delete 16
//	generation 3: empty (the key does not exist)
func testHistory() *keyIndex {
	ki := &keyIndex{key: []byte("foo")}
	for _, step := range []struct {
		rev  revision
		tomb bool
	}{
		{rv(2), false}, {rv(4), false}, {rv(6), true},
		{rv(8), false}, {rv(10), false}, {rv(12), true},
		{rv(14), false}, {revision{15, 1}, false}, {rv(16), true},
	} {
		if step.tomb {
			if !ki.tombstone(step.rev) {
				panic("tombstone of a key that is not live")
			}
		} else {
			ki.put(step.rev, 0)
		}
	}
	return ki
}

// render shows the generations as in etcd's tests: revisions with a t
// for the tombstone, generations separated by |.
func render(ki *keyIndex) string {
	var s string
	for i := range ki.numEntries() {
		h := ki.entry(i)
		if i > 0 && !ki.entry(i-1).isTombstone() {
			s += " "
		}
		s += fmt.Sprint(h.main)
		if r := h.rev(); r.sub != 0 {
			s += fmt.Sprintf(".%d", r.sub)
		}
		if h.isTombstone() {
			s += "t | "
		}
	}
	return s
}

// TestKeyIndexSize pins the layout keyIndex's comment draws: 80 bytes,
// one of Go's allocation size classes, so a key written once costs that
// plus its key bytes. A new field would move it to the next class (96).
func TestKeyIndexSize(t *testing.T) {
	if size := unsafe.Sizeof(keyIndex{}); size != 80 {
		t.Fatalf("keyIndex is %d bytes, want 80", size)
	}
	if size := unsafe.Sizeof(histRev{}); size != unsafe.Sizeof(revision{}) {
		t.Fatalf("histRev is %d bytes, a revision %d", size, unsafe.Sizeof(revision{}))
	}
}

func TestKeyIndexGet(t *testing.T) {
	ki := testHistory()
	dropped := 0
	ki.compact(4, func(revision, bool) { dropped++ })
	if dropped != 1 {
		t.Fatalf("compacting at 4 dropped %d revisions, want 1", dropped)
	}
	tests := []struct {
		at  int64
		mod revision
		ok  bool
	}{
		{at: 17}, {at: 16},
		{15, revision{15, 1}, true},
		{14, rv(14), true},
		{at: 13}, {at: 12},
		{11, rv(10), true},
		{10, rv(10), true},
		{9, rv(8), true},
		{8, rv(8), true},
		{at: 7}, {at: 6},
		{5, rv(4), true},
		{4, rv(4), true},
		{at: 3}, {at: 2}, {at: 1}, {at: 0},
	}
	for _, tt := range tests {
		mod, ok := ki.get(tt.at)
		if mod != tt.mod || ok != tt.ok {
			t.Errorf("get(%d) = %v %v; want %v %v", tt.at, mod, ok, tt.mod, tt.ok)
		}
	}
	if ki.isLive() || ki.created != 0 || ki.ver != 0 {
		t.Errorf("deleted key: live %v, created %d, version %d", ki.isLive(), ki.created, ki.ver)
	}
}

// TestKeyIndexLiveGeneration checks the state the writer reads for the
// next put: the live generation's create revision, version and lease,
// also once compaction has dropped the put that created it.
func TestKeyIndexLiveGeneration(t *testing.T) {
	ki := &keyIndex{key: []byte("foo")}
	live := func(created, ver, lease int64) {
		t.Helper()
		if !ki.isLive() || ki.created != created || ki.ver != ver || ki.lease != lease {
			t.Fatalf("live %v created %d version %d lease %d; want created %d version %d lease %d (history %s)",
				ki.isLive(), ki.created, ki.ver, ki.lease, created, ver, lease, render(ki))
		}
	}
	ki.put(rv(2), 7)
	live(2, 1, 7)
	ki.put(rv(4), 0)
	live(2, 2, 0)
	ki.tombstone(rv(6))
	if ki.isLive() || ki.lease != 0 {
		t.Fatalf("after delete: live %v lease %d", ki.isLive(), ki.lease)
	}
	ki.put(rv(8), 3)
	live(8, 1, 3)
	ki.put(revision{9, 2}, 3)
	live(8, 2, 3)
	ki.compact(9, func(revision, bool) {})
	if got := render(ki); got != "9.2" {
		t.Fatalf("compact(9) left %q", got)
	}
	live(8, 2, 3) // the put at 8 is gone, its generation is not
	ki.put(rv(10), 0)
	live(8, 3, 0)
}

func TestKeyIndexCompactAndKeep(t *testing.T) {
	tests := []struct {
		at      int64
		left    string // generations after compaction
		dropped []string
		keep    []revision
	}{
		{1, "2 4 6t | 8 10 12t | 14 15.1 16t | ", nil, nil},
		{2, "2 4 6t | 8 10 12t | 14 15.1 16t | ", nil, []revision{rv(2)}},
		{3, "2 4 6t | 8 10 12t | 14 15.1 16t | ", nil, []revision{rv(2)}},
		{4, "4 6t | 8 10 12t | 14 15.1 16t | ", []string{"2"}, []revision{rv(4)}},
		{5, "4 6t | 8 10 12t | 14 15.1 16t | ", []string{"2"}, []revision{rv(4)}},
		// A tombstone at exactly the compaction revision stays, but
		// HashKV does not count it (keep).
		{6, "6t | 8 10 12t | 14 15.1 16t | ", []string{"2", "4"}, nil},
		{7, "8 10 12t | 14 15.1 16t | ", []string{"2", "4", "6t"}, nil},
		{8, "8 10 12t | 14 15.1 16t | ", []string{"2", "4", "6t"}, []revision{rv(8)}},
		{11, "10 12t | 14 15.1 16t | ", []string{"2", "4", "6t", "8"}, []revision{rv(10)}},
		{12, "12t | 14 15.1 16t | ", []string{"2", "4", "6t", "8", "10"}, nil},
		{15, "15.1 16t | ", []string{"2", "4", "6t", "8", "10", "12t", "14"}, []revision{{15, 1}}},
		{16, "16t | ", []string{"2", "4", "6t", "8", "10", "12t", "14", "15.1"}, nil},
		{17, "", []string{"2", "4", "6t", "8", "10", "12t", "14", "15.1", "16t"}, nil},
	}
	for _, tt := range tests {
		keep := map[revision]struct{}{}
		testHistory().keep(tt.at, keep)
		sameKeep := len(keep) == len(tt.keep)
		for _, r := range tt.keep {
			_, found := keep[r]
			sameKeep = sameKeep && found
		}
		if !sameKeep {
			t.Errorf("keep(%d) = %v, want %v", tt.at, keep, tt.keep)
		}

		ki := testHistory()
		if got := ki.needsCompaction(tt.at); got != (len(tt.dropped) > 0) {
			t.Errorf("needsCompaction(%d) = %v", tt.at, got)
		}
		var dropped []string
		ki.compact(tt.at, func(r revision, tomb bool) {
			s := fmt.Sprint(r.main)
			if r.sub != 0 {
				s += fmt.Sprintf(".%d", r.sub)
			}
			if tomb {
				s += "t"
			}
			dropped = append(dropped, s)
		})
		if got := render(ki); got != tt.left {
			t.Errorf("compact(%d) left %q, want %q", tt.at, got, tt.left)
		}
		if !slices.Equal(dropped, tt.dropped) {
			t.Errorf("compact(%d) dropped %q, want %q", tt.at, dropped, tt.dropped)
		}
		if ki.isEmpty() != (tt.at == 17) {
			t.Errorf("compact(%d): isEmpty = %v", tt.at, ki.isEmpty())
		}

		// Compacting in two steps ends the same as in one.
		step := testHistory()
		step.compact(tt.at/2, func(revision, bool) {})
		step.compact(tt.at, func(revision, bool) {})
		if got := render(step); got != render(ki) {
			t.Errorf("compact(%d) then compact(%d) left %q, want %q", tt.at/2, tt.at, got, render(ki))
		}
	}
}

func TestKeyIndexRestore(t *testing.T) {
	// The oldest record left after a compaction is a tombstone.
	ki := &keyIndex{key: []byte("foo")}
	ki.restoreTombstone(rv(7))
	for at := int64(0); at < 10; at++ {
		if _, ok := ki.get(at); ok {
			t.Fatalf("restored tombstone: key found at %d", at)
		}
	}
	ki.put(rv(9), 5)
	if mod, ok := ki.get(9); !ok || mod != rv(9) || ki.created != 9 || ki.ver != 1 || ki.lease != 5 {
		t.Fatalf("put after restored tombstone: %v %v created %d version %d lease %d", mod, ok, ki.created, ki.ver, ki.lease)
	}
	// The oldest record left is a put whose earlier history is gone.
	ki = &keyIndex{key: []byte("bar")}
	ki.restore(3, rv(6), 4, 0)
	ki.put(rv(8), 0)
	if _, ok := ki.get(8); !ok || ki.created != 3 || ki.ver != 5 {
		t.Fatalf("restored history: created %d version %d found %v; want 3, 5", ki.created, ki.ver, ok)
	}
	if _, ok := ki.get(5); ok {
		t.Fatal("restored history: found before its oldest record")
	}
}

func TestKeyIndexRejectsOldRevisions(t *testing.T) {
	ki := testHistory()
	for _, r := range []revision{rv(16), {15, 2}, rv(3)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("put at %v after 16 did not panic", r)
				}
			}()
			ki.put(r, 0)
		}()
	}
	if ki.tombstone(rv(20)) {
		t.Error("tombstone of a deleted key succeeded")
	}
}

// buildIndex puts each key at its own revision, starting at 2.
func buildIndex(keys ...string) (*indexWriter, int64) {
	x := newIndexWriter()
	rev := int64(1)
	for _, k := range keys {
		rev++
		x.put([]byte(k), rv(rev), 0)
	}
	return x, rev
}

func TestIndexRanges(t *testing.T) {
	x, _ := buildIndex("a", "b", "c", "d")
	x.tombstone(x.lookup([]byte("c")), rv(6))
	tests := []struct {
		key, end string
		nilEnd   bool
		at       int64
		limit    int
		want     []int64
		total    int
	}{
		{key: "a", nilEnd: true, at: 6, want: []int64{2}, total: 1},
		{key: "c", nilEnd: true, at: 6, total: 0},
		{key: "c", nilEnd: true, at: 5, want: []int64{4}, total: 1},
		{key: "a", end: "c", at: 6, want: []int64{2, 3}, total: 2},
		{key: "b", end: "", at: 6, want: []int64{3, 5}, total: 2}, // empty end: no upper bound
		{key: "a", end: "", at: 6, limit: 2, want: []int64{2, 3}, total: 3},
		{key: "a", end: "", at: 3, want: []int64{2, 3}, total: 2},
		{key: "d", end: "a", at: 6, total: 0},
	}
	for _, tt := range tests {
		var end []byte
		if !tt.nilEnd {
			end = []byte(tt.end)
		}
		revs, total := x.revisions([]byte(tt.key), end, tt.at, tt.limit)
		var mains []int64
		for _, r := range revs {
			mains = append(mains, r.main)
		}
		if !slices.Equal(mains, tt.want) || total != tt.total {
			t.Errorf("revisions(%q, %q, %d, %d) = %v, %d; want %v, %d", tt.key, end, tt.at, tt.limit, mains, total, tt.want, tt.total)
		}
		if n := x.count([]byte(tt.key), end, tt.at); n != tt.total {
			t.Errorf("count(%q, %q, %d) = %d, want %d", tt.key, end, tt.at, n, tt.total)
		}
		if n := len(x.liveKeys([]byte(tt.key), end, tt.at)); n != tt.total {
			t.Errorf("liveKeys(%q, %q, %d) has %d keys, want %d", tt.key, end, tt.at, n, tt.total)
		}
	}
}

// TestIndexSnapshotIsolation checks the copy on write of the index: a
// published view never changes, whatever the writer does afterwards,
// including appends into revision arrays the view shares.
func TestIndexSnapshotIsolation(t *testing.T) {
	x, rev := buildIndex("a", "b", "c")
	describe := func(v indexView) string {
		var s string
		v.tree.Ascend(func(ki *keyIndex) bool {
			s += string(ki.key) + ":" + render(ki) + ";"
			return true
		})
		return s
	}
	var views []indexView
	var want []string
	snap := func() {
		v := x.snapshot()
		views = append(views, v)
		want = append(want, describe(v))
	}
	snap()

	// Readers walk the first view while the writer changes the index.
	first, firstWant := views[0], want[0]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if got := describe(first); got != firstWant {
					errs <- got
					return
				}
			}
		}()
	}
	for i := range 30 {
		rev++
		x.put([]byte("a"), rv(rev), 0)
		rev++
		x.put([]byte(fmt.Sprint("n", i%5)), rv(rev), 0)
		if i%4 == 3 {
			rev++
			x.tombstone(x.lookup([]byte("b")), rv(rev))
			rev++
			x.put([]byte("b"), rv(rev), 0)
		}
		if i%7 == 6 {
			x.compact(rev-3, func(revision, bool) {})
		}
		if i%3 == 0 {
			snap()
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Errorf("view 0 changed under a reader: %s, want %s", got, firstWant)
	}
	for i, v := range views {
		if got := describe(v); got != want[i] {
			t.Errorf("view %d changed:\n got %s\nwant %s", i, got, want[i])
		}
	}
}
