package kvstore

import (
	"bytes"
	"fmt"
)

// keyIndex is the history of one key: the revisions that wrote it and are
// not compacted, oldest first, deletions marked, plus the state of the
// key's live generation that the writer needs for the next put.
//
// etcd groups a history into generations, each running from the put that
// creates the key to the tombstone that deletes it. Here the generations
// are implicit: a tombstone ends one, and the entries after it belong to
// the next. The newest entry (last) is held in the keyIndex itself and
// only the older ones need an array, so a key written once, or compacted
// down to its latest revision (most keys of a metadata store, most of the
// time), costs two allocations: the keyIndex and the key bytes. For
// example, put at 2, put at 3, delete at 5, put at 7 (etcd's generations
// [2 3 5t] and [7]) is:
//
//	keyIndex, 80 bytes                          key bytes (own array)
//	+--------------------------------+          +---------+
//	| key     []byte                 |--------> | f o o   |
//	| lease   0  (of the put at 7)   |          +---------+
//	| created 7  (live generation)   |
//	| ver     1  (live generation)   |          olderRevs           its array
//	| last    7.0                    |          +------------+      +-------------+
//	| older   *olderRevs             |--------> | revs       |----> | 2.0 3.0 5.0t|
//	| epoch                          |          +------------+      +-------------+
//	+--------------------------------+
//
// and the same key written once, at 2, is {key, created 2, ver 1, last 2.0,
// older nil}. A read at revision r needs only the entries: the newest one
// at or below r is the value, unless it is a tombstone (the key was
// deleted then). The writer needs the create revision and version of the
// live generation, which the entries alone cannot give once compaction
// has dropped the put that created it; that is why created and ver are
// kept, and only for the live generation (nothing reads them for older
// ones: a past value's create revision and version are in its record).
//
// Invariants: entries (older, then last) strictly increase (put panics
// otherwise); last is zero only while the history is empty (a new
// keyIndex, or one compaction emptied), and then older is nil; older is
// nil or non-empty; the key is live exactly when last is a put, and while
// it is not, created, ver and lease are 0.
//
// keyIndex values reachable from a published index snapshot are
// immutable, and so is their olderRevs. The writer only changes a
// keyIndex whose epoch equals its current epoch (a private copy made
// since the last publication, see indexWriter); the copy has its own
// olderRevs but shares the array, and the writer only appends beyond the
// length any published copy can see, so readers never observe a write.
// Compaction builds new arrays.
type keyIndex struct {
	key     []byte     // immutable; shared by every copy
	lease   int64      // lease of the latest put; 0 while not live or without lease
	created int64      // main revision of the put that created the live generation; 0 while not live
	ver     int64      // puts in the live generation, compacted ones included; 0 while not live
	last    histRev    // newest entry; zero while the history is empty
	older   *olderRevs // entries before last, oldest first; nil when there are none
	epoch   uint64
}

// olderRevs holds the entries of a history before its newest one.
type olderRevs struct {
	revs []histRev
}

// histRev is one entry of a key's history: a revision, and whether it is
// the tombstone of a delete. The mark is the top bit of sub (a sub
// revision is never negative, see parseRevKey), so an entry is as small
// as a revision.
type histRev struct {
	main int64
	sub  uint64 // sub revision; tombstoneBit marks a tombstone
}

const tombstoneBit = 1 << 63

func newHistRev(rev revision, tombstone bool) histRev {
	h := histRev{main: rev.main, sub: uint64(rev.sub)}
	if tombstone {
		h.sub |= tombstoneBit
	}
	return h
}

func (h histRev) rev() revision     { return revision{main: h.main, sub: int64(h.sub &^ tombstoneBit)} }
func (h histRev) isTombstone() bool { return h.sub&tombstoneBit != 0 }

func compareKeyIndex(a, b *keyIndex) bool { return bytes.Compare(a.key, b.key) < 0 }

// clone returns a private copy for the writer at the given epoch.
func (ki *keyIndex) clone(epoch uint64) *keyIndex {
	c := *ki
	if ki.older != nil {
		c.older = &olderRevs{revs: ki.older.revs}
	}
	c.epoch = epoch
	return &c
}

// isLive reports whether the key exists at the newest revision.
func (ki *keyIndex) isLive() bool { return !ki.isEmpty() && !ki.last.isTombstone() }

// isEmpty reports whether no revision of the key is left.
func (ki *keyIndex) isEmpty() bool { return ki.last.main == 0 }

// numEntries returns the number of entries in the history.
func (ki *keyIndex) numEntries() int {
	n := 0
	if ki.older != nil {
		n = len(ki.older.revs)
	}
	if !ki.isEmpty() {
		n++
	}
	return n
}

// entry returns the i-th entry of the history, oldest first.
func (ki *keyIndex) entry(i int) histRev {
	if ki.older != nil && i < len(ki.older.revs) {
		return ki.older.revs[i]
	}
	return ki.last
}

// push makes h the newest entry.
func (ki *keyIndex) push(h histRev) {
	if !h.rev().greaterThan(ki.last.rev()) {
		panic(fmt.Sprintf("kvstore: write of key %q at revision %v not after %v", ki.key, h.rev(), ki.last.rev()))
	}
	if !ki.isEmpty() {
		if ki.older == nil {
			ki.older = &olderRevs{}
		}
		ki.older.revs = append(ki.older.revs, ki.last)
	}
	ki.last = h
}

// put records a write of the key at rev.
func (ki *keyIndex) put(rev revision, lease int64) {
	wasLive := ki.isLive()
	ki.push(newHistRev(rev, false))
	if !wasLive {
		ki.created, ki.ver = rev.main, 0
	}
	ki.ver++
	ki.lease = lease
}

// restore starts the history of a key met for the first time while
// rebuilding the index; earlier revisions were compacted away, so the
// live generation's creation and version come from the stored KeyValue.
func (ki *keyIndex) restore(created int64, modified revision, ver, lease int64) {
	ki.last = newHistRev(modified, false)
	ki.created, ki.ver, ki.lease = created, ver, lease
}

// restoreTombstone starts a history whose oldest surviving record is a
// tombstone (the compaction kept it because it was the key's latest change).
func (ki *keyIndex) restoreTombstone(rev revision) {
	ki.last = newHistRev(rev, true)
	ki.created, ki.ver, ki.lease = 0, 0, 0
}

// tombstone records a deletion at rev, which ends the live generation.
// It reports false when the key is not live.
func (ki *keyIndex) tombstone(rev revision) bool {
	if !ki.isLive() {
		return false
	}
	ki.push(newHistRev(rev, true))
	ki.created, ki.ver, ki.lease = 0, 0, 0
	return true
}

// get returns the revision of the value the key had at atRev; ok is false
// if the key did not exist then. Reads at or after the newest entry, the
// common case, look at nothing else.
func (ki *keyIndex) get(atRev int64) (rev revision, ok bool) {
	h, found := ki.newestAtOrBelow(atRev)
	if !found || h.isTombstone() {
		return revision{}, false
	}
	return h.rev(), true
}

func (ki *keyIndex) newestAtOrBelow(atRev int64) (histRev, bool) {
	if ki.isEmpty() {
		return histRev{}, false
	}
	if ki.last.main <= atRev {
		return ki.last, true
	}
	if ki.older == nil {
		return histRev{}, false
	}
	revs := ki.older.revs
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].main <= atRev {
			return revs[i], true
		}
	}
	return histRev{}, false
}

// compactionPoint finds what compacting at atRev keeps, as etcd's
// keyIndex.doCompact does over generations: generations deleted before
// atRev go whole; in the first generation that survives (the live one,
// or one whose tombstone is at or after atRev), the newest entry <= atRev
// stays, and everything before it goes. It returns the index of the
// first entry kept (numEntries() when none is) and of that newest entry
// (-1 if the surviving generation starts after atRev or is empty).
func (ki *keyIndex) compactionPoint(atRev int64) (keepFrom, newest int) {
	n := ki.numEntries()
	genStart, genEnd := 0, n-1
	for i := 0; i < n; i++ {
		if h := ki.entry(i); h.isTombstone() {
			if h.main >= atRev {
				genEnd = i
				break
			}
			genStart = i + 1
		}
	}
	for i := genEnd; i >= genStart; i-- {
		if ki.entry(i).main <= atRev {
			return i, i
		}
	}
	return genStart, -1
}

// needsCompaction reports whether compacting at atRev drops anything.
func (ki *keyIndex) needsCompaction(atRev int64) bool { return ki.compactionDrops(atRev) > 0 }

// compactionDrops is the number of entries compacting at atRev drops.
func (ki *keyIndex) compactionDrops(atRev int64) int {
	if ki.older == nil {
		// One entry: only a tombstone before atRev goes.
		if ki.last.isTombstone() && ki.last.main < atRev {
			return 1
		}
		return 0
	}
	keepFrom, _ := ki.compactionPoint(atRev)
	return keepFrom
}

// compact drops every entry that compacting at atRev makes unreachable
// (see compactionPoint) and reports each one to drop, with its tombstone
// mark. A tombstone at exactly atRev stays (so reads at atRev still see
// the delete), as in etcd >= 3.5.16. When nothing is left, isEmpty
// becomes true.
func (ki *keyIndex) compact(atRev int64, drop func(rev revision, tombstone bool)) {
	keepFrom, _ := ki.compactionPoint(atRev)
	if keepFrom == 0 {
		return
	}
	for i := range keepFrom {
		h := ki.entry(i)
		drop(h.rev(), h.isTombstone())
	}
	switch left := ki.numEntries() - keepFrom; {
	case left == 0:
		ki.last, ki.older = histRev{}, nil
	case left == 1:
		ki.older = nil
	default:
		// Copy rather than reslice so the dropped prefix can be freed.
		ki.older = &olderRevs{revs: append([]histRev(nil), ki.older.revs[keepFrom:]...)}
	}
}

// keep adds to available the revision of this key that survives a
// compaction at atRev, leaving out a surviving tombstone: HashKV uses this
// to hash the same revisions whether or not the compaction kept it
// (etcd's keyIndex.keep).
func (ki *keyIndex) keep(atRev int64, available map[revision]struct{}) {
	if ki.isEmpty() {
		return
	}
	_, newest := ki.compactionPoint(atRev)
	if newest == -1 {
		return
	}
	if h := ki.entry(newest); !h.isTombstone() {
		available[h.rev()] = struct{}{}
	}
}
