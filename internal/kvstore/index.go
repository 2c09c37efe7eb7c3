package kvstore

import (
	"sync"

	"github.com/google/btree"
)

// indexDegree is the B-tree degree of the key index (etcd uses 32 too).
const indexDegree = 32

// indexView is a read-only key index: a B-tree of keyIndex ordered by key.
// A published indexView is never modified, so any number of goroutines may
// use it without locks.
type indexView struct {
	tree *btree.BTreeG[*keyIndex]
	// probes recycles the keyIndex values that carry a searched key into
	// the B-tree: the tree compares through a func value, so a probe
	// escapes, and every read would otherwise allocate one.
	probes *sync.Pool
}

func newProbePool() *sync.Pool {
	return &sync.Pool{New: func() any { return new(keyIndex) }}
}

// probe returns a search key for key; release it after the search.
func (x indexView) probe(key []byte) *keyIndex {
	p := x.probes.Get().(*keyIndex)
	p.key = key
	return p
}

func (x indexView) release(p *keyIndex) {
	p.key = nil // do not keep the caller's bytes alive
	x.probes.Put(p)
}

// lookup returns the keyIndex of key, or nil.
func (x indexView) lookup(key []byte) *keyIndex {
	p := x.probe(key)
	ki, ok := x.tree.Get(p)
	x.release(p)
	if !ok {
		return nil
	}
	return ki
}

// visit calls fn for every keyIndex in [key, end) in key order until fn
// returns false. end semantics follow etcd's index: nil means the single
// key, empty (non-nil) means no upper bound.
func (x indexView) visit(key, end []byte, fn func(ki *keyIndex) bool) {
	if end == nil {
		if ki := x.lookup(key); ki != nil {
			fn(ki)
		}
		return
	}
	from := x.probe(key)
	defer x.release(from)
	if len(end) == 0 {
		x.tree.AscendGreaterOrEqual(from, fn)
		return
	}
	to := x.probe(end)
	defer x.release(to)
	x.tree.AscendRange(from, to, fn)
}

// revisions returns the revisions of the keys alive at atRev in [key,
// end), at most limit of them (limit <= 0: all), and how many keys are
// alive in total.
func (x indexView) revisions(key, end []byte, atRev int64, limit int) (revs []revision, total int) {
	x.visit(key, end, func(ki *keyIndex) bool {
		if rev, ok := ki.get(atRev); ok {
			if limit <= 0 || len(revs) < limit {
				revs = append(revs, rev)
			}
			total++
		}
		return true
	})
	return revs, total
}

// count returns how many keys in [key, end) are alive at atRev.
func (x indexView) count(key, end []byte, atRev int64) int {
	total := 0
	x.visit(key, end, func(ki *keyIndex) bool {
		if _, ok := ki.get(atRev); ok {
			total++
		}
		return true
	})
	return total
}

// liveKeys returns the keyIndexes in [key, end) alive at atRev.
func (x indexView) liveKeys(key, end []byte, atRev int64) []*keyIndex {
	var kis []*keyIndex
	x.visit(key, end, func(ki *keyIndex) bool {
		if _, ok := ki.get(atRev); ok {
			kis = append(kis, ki)
		}
		return true
	})
	return kis
}

// keep returns the revisions <= atRev that a compaction at atRev would
// keep, minus surviving tombstones (see keyIndex.keep).
func (x indexView) keep(atRev int64) map[revision]struct{} {
	available := make(map[revision]struct{})
	x.tree.Ascend(func(ki *keyIndex) bool {
		ki.keep(atRev, available)
		return true
	})
	return available
}

// survivors returns the revisions <= atRev, tombstones included, that a
// finished compaction at atRev leaves stored (for most keys one: the
// newest entry <= atRev of the generation that survives). While the
// compaction is in progress, the records <= atRev not in it are the ones
// still to be deleted.
func (x indexView) survivors(atRev int64) map[revision]struct{} {
	kept := make(map[revision]struct{})
	x.tree.Ascend(func(ki *keyIndex) bool {
		keepFrom, _ := ki.compactionPoint(atRev)
		for i, n := keepFrom, ki.numEntries(); i < n && ki.entry(i).main <= atRev; i++ {
			kept[ki.entry(i).rev()] = struct{}{}
		}
		return true
	})
	return kept
}

// survives reports whether the record of key at rev, with rev.main <=
// atRev, is one a finished compaction at atRev keeps (see survivors).
func (x indexView) survives(key []byte, rev revision, atRev int64) bool {
	ki := x.lookup(key)
	if ki == nil {
		return false
	}
	keepFrom, _ := ki.compactionPoint(atRev)
	for i, n := keepFrom, ki.numEntries(); i < n && ki.entry(i).main <= atRev; i++ {
		if ki.entry(i).rev() == rev {
			return true
		}
	}
	return false
}

// indexWriter is the apply goroutine's key index. It publishes immutable
// snapshots (indexView) with snapshot(); afterwards it copies a keyIndex
// before changing it for the first time (copy on write, tracked by epoch),
// and the B-tree copies its shared nodes the same way.
type indexWriter struct {
	indexView
	epoch uint64
	// live counts the keys that exist at the newest revision (etcd's
	// etcd_debugging_mvcc_keys_total).
	live int64
}

func newIndexWriter() *indexWriter {
	return &indexWriter{indexView: indexView{tree: btree.NewG(indexDegree, compareKeyIndex), probes: newProbePool()}, epoch: 1}
}

// snapshot returns an immutable view of the current index and starts a
// new epoch, so that every later change copies what it touches.
func (x *indexWriter) snapshot() indexView {
	v := indexView{tree: x.tree.Clone(), probes: x.probes}
	x.epoch++
	return v
}

// mutable returns a keyIndex the writer may change in place: ki itself if
// it was created in this epoch, else a copy that replaces it in the tree.
func (x *indexWriter) mutable(ki *keyIndex) *keyIndex {
	if ki.epoch == x.epoch {
		return ki
	}
	c := ki.clone(x.epoch)
	x.tree.ReplaceOrInsert(c)
	return c
}

// put records a write of key at rev, creating the key's index if needed.
// key is copied when a new keyIndex is created.
func (x *indexWriter) put(key []byte, rev revision, lease int64) {
	if ki := x.lookup(key); ki != nil {
		if !ki.isLive() {
			x.live++
		}
		x.mutable(ki).put(rev, lease)
		return
	}
	x.live++
	ki := &keyIndex{key: append([]byte(nil), key...), epoch: x.epoch}
	ki.put(rev, lease)
	x.tree.ReplaceOrInsert(ki)
}

// tombstone records the deletion of ki's key at rev. It reports false if
// the key is not live.
func (x *indexWriter) tombstone(ki *keyIndex, rev revision) bool {
	if !ki.isLive() {
		return false
	}
	x.live--
	return x.mutable(ki).tombstone(rev)
}

// insert adds a keyIndex built while rebuilding the index.
func (x *indexWriter) insert(ki *keyIndex) {
	if ki.isLive() {
		x.live++
	}
	ki.epoch = x.epoch
	x.tree.ReplaceOrInsert(ki)
}

// compact drops from the index every revision a compaction at atRev makes
// unreachable, reporting each to drop, and removes keys left without
// history. It returns the number of keys whose history changed.
func (x *indexWriter) compact(atRev int64, drop func(rev revision, tombstone bool)) int {
	touched, _ := x.compactFrom(atRev, nil, 0, drop)
	return touched
}

// compactFrom is one step of a compaction at atRev: it compacts the keys
// from the key from (nil: the first key) on, whole keys at a time, until
// at least maxDrop revisions were dropped or 16 times as many keys looked
// at (maxDrop <= 0: to the end). It returns the number of keys whose
// history changed and the key the next step starts from, nil when the
// step reached the end of the key space.
//
// Keys are compacted independently, and compacting one at atRev leaves
// every read and keep() at revisions >= atRev unchanged
// (TestKeyIndexCompactionProgressInvisible), so a compaction may be
// spread over many steps with writes between them.
func (x *indexWriter) compactFrom(atRev int64, from []byte, maxDrop int, drop func(rev revision, tombstone bool)) (touched int, next []byte) {
	var (
		kis     []*keyIndex
		dropped int
		visited int
	)
	visit := func(ki *keyIndex) bool {
		if maxDrop > 0 && (dropped >= maxDrop || visited >= 16*maxDrop) {
			next = ki.key
			return false
		}
		visited++
		if n := ki.compactionDrops(atRev); n > 0 {
			kis = append(kis, ki)
			dropped += n
		}
		return true
	}
	if from == nil {
		x.tree.Ascend(visit)
	} else {
		p := x.probe(from)
		x.tree.AscendGreaterOrEqual(p, visit)
		x.release(p)
	}
	for _, ki := range kis {
		m := ki
		if m.epoch != x.epoch {
			m = ki.clone(x.epoch)
		}
		m.compact(atRev, drop)
		if m.isEmpty() {
			x.tree.Delete(m)
		} else if m != ki {
			x.tree.ReplaceOrInsert(m)
		}
	}
	return len(kis), next
}
