package kvstore

import (
	"bytes"
	"fmt"
)

// keyIndex is the history of one key: the revisions that wrote it, grouped
// into generations. A generation runs from the put that created the key to
// the tombstone that deleted it; the last generation is the live one and is
// empty while the key does not exist. For example, put at 2, put at 3,
// delete at 5, put at 7 gives:
//
//	generations[0]: created 2, ver 3, revs [2.0 3.0 5.0(tombstone)]
//	generations[1]: created 7, ver 1, revs [7.0]
//
// Invariants: every generation but the last is non-empty and ends with its
// tombstone; revisions increase strictly along the whole history.
//
// keyIndex values reachable from a published index snapshot are immutable.
// The writer only changes a keyIndex whose epoch equals its current epoch
// (a private copy made since the last publication, see indexWriter). Copies
// share the backing arrays of revs; the writer only appends beyond the
// length any published copy can see, so readers never observe a write.
type keyIndex struct {
	key         []byte
	modified    revision // last revision that wrote the key
	lease       int64    // lease of the latest put, 0 when deleted or none
	generations []generation
	epoch       uint64
}

type generation struct {
	ver     int64    // number of puts in the generation, including compacted ones
	created revision // revision of the put that started the generation
	revs    []revision
}

func (g *generation) isEmpty() bool { return len(g.revs) == 0 }

// lastAtOrBelow returns the index of the newest revision whose main
// revision is <= atRev, or -1.
func (g *generation) lastAtOrBelow(atRev int64) int {
	for i := len(g.revs) - 1; i >= 0; i-- {
		if g.revs[i].main <= atRev {
			return i
		}
	}
	return -1
}

func compareKeyIndex(a, b *keyIndex) bool { return bytes.Compare(a.key, b.key) < 0 }

// clone returns a private copy for the writer at the given epoch.
func (ki *keyIndex) clone(epoch uint64) *keyIndex {
	c := *ki
	c.generations = append(make([]generation, 0, len(ki.generations)+1), ki.generations...)
	c.epoch = epoch
	return &c
}

func (ki *keyIndex) isEmpty() bool {
	return len(ki.generations) == 1 && ki.generations[0].isEmpty()
}

// put records a write of the key at rev.
func (ki *keyIndex) put(rev revision, lease int64) {
	if !rev.greaterThan(ki.modified) {
		panic(fmt.Sprintf("kvstore: put of key %q at revision %v not after %v", ki.key, rev, ki.modified))
	}
	if len(ki.generations) == 0 {
		ki.generations = append(ki.generations, generation{})
	}
	g := &ki.generations[len(ki.generations)-1]
	if g.isEmpty() {
		g.created = rev
	}
	g.revs = append(g.revs, rev)
	g.ver++
	ki.modified = rev
	ki.lease = lease
}

// restore starts the history of a key met for the first time while
// rebuilding the index; earlier revisions were compacted away, so the
// generation's creation and version come from the stored KeyValue.
func (ki *keyIndex) restore(created, modified revision, ver, lease int64) {
	ki.modified = modified
	ki.lease = lease
	ki.generations = append(ki.generations, generation{created: created, ver: ver, revs: []revision{modified}})
}

// restoreTombstone starts a history whose oldest surviving record is a
// tombstone (the compaction kept it because it was the key's latest change).
func (ki *keyIndex) restoreTombstone(rev revision) {
	ki.restore(revision{}, rev, 1, 0)
	ki.lease = 0
	ki.generations = append(ki.generations, generation{})
}

// tombstone records a deletion at rev and closes the live generation.
// It reports false when the key is not live.
func (ki *keyIndex) tombstone(rev revision) bool {
	if len(ki.generations) == 0 || ki.generations[len(ki.generations)-1].isEmpty() {
		return false
	}
	ki.put(rev, 0)
	ki.generations = append(ki.generations, generation{})
	return true
}

// get returns the revision of the value the key had at atRev, the revision
// that created that generation, and the key's version then. ok is false if
// the key did not exist at atRev.
func (ki *keyIndex) get(atRev int64) (modified, created revision, ver int64, ok bool) {
	g := ki.findGeneration(atRev)
	if g == nil {
		return revision{}, revision{}, 0, false
	}
	n := g.lastAtOrBelow(atRev)
	if n == -1 {
		return revision{}, revision{}, 0, false
	}
	return g.revs[n], g.created, g.ver - int64(len(g.revs)-n-1), true
}

// findGeneration returns the generation alive at rev, or nil if the key
// did not exist then.
func (ki *keyIndex) findGeneration(rev int64) *generation {
	last := len(ki.generations) - 1
	for i := last; i >= 0; i-- {
		g := &ki.generations[i]
		if g.isEmpty() {
			continue
		}
		if i != last && g.revs[len(g.revs)-1].main <= rev {
			// Deleted at or before rev (and no later generation started
			// at or before rev, or we would have returned it).
			return nil
		}
		if g.revs[0].main <= rev {
			return g
		}
	}
	return nil
}

// compactionPoint finds what compacting at atRev keeps: the index of the
// first generation that survives and, inside it, the index of the newest
// revision <= atRev (-1 if the generation starts after atRev or is empty).
// Everything before that point is dropped.
func (ki *keyIndex) compactionPoint(atRev int64) (genIdx, revIdx int) {
	for genIdx < len(ki.generations)-1 {
		g := &ki.generations[genIdx]
		if g.revs[len(g.revs)-1].main >= atRev {
			break
		}
		genIdx++
	}
	return genIdx, ki.generations[genIdx].lastAtOrBelow(atRev)
}

// needsCompaction reports whether compacting at atRev drops anything.
func (ki *keyIndex) needsCompaction(atRev int64) bool {
	genIdx, revIdx := ki.compactionPoint(atRev)
	return genIdx > 0 || revIdx > 0
}

// compact drops every revision that compacting at atRev makes unreachable
// and reports each one to drop (tombstone is true for the revision that
// closed a generation). Generations deleted before atRev go whole; in the
// first surviving one, the newest revision <= atRev stays (so reads at
// atRev still find the value), also when it is the tombstone of a delete
// at exactly atRev, as in etcd >= 3.5.16.
func (ki *keyIndex) compact(atRev int64, drop func(rev revision, tombstone bool)) {
	genIdx, revIdx := ki.compactionPoint(atRev)
	for _, g := range ki.generations[:genIdx] {
		for i, r := range g.revs {
			drop(r, i == len(g.revs)-1)
		}
	}
	g := &ki.generations[genIdx]
	if revIdx > 0 {
		for _, r := range g.revs[:revIdx] {
			drop(r, false)
		}
		// Copy rather than reslice so the dropped prefix can be freed.
		g.revs = append([]revision(nil), g.revs[revIdx:]...)
	}
	ki.generations = append([]generation(nil), ki.generations[genIdx:]...)
}

// keep adds to available the revision of this key that survives a
// compaction at atRev, leaving out a surviving tombstone: HashKV uses this
// to hash the same revisions whether or not the compaction kept it
// (etcd's keyIndex.keep).
func (ki *keyIndex) keep(atRev int64, available map[revision]struct{}) {
	if ki.isEmpty() {
		return
	}
	genIdx, revIdx := ki.compactionPoint(atRev)
	if revIdx == -1 {
		return
	}
	g := &ki.generations[genIdx]
	if revIdx == len(g.revs)-1 && genIdx != len(ki.generations)-1 {
		return // a tombstone
	}
	available[g.revs[revIdx]] = struct{}{}
}
