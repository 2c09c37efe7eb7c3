package kvstore

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// modelKey is a key history kept the way etcd's keyIndex keeps it: a list
// of generations, each with its create revision, version and revisions.
// It is the straightforward reference keyIndex is checked against.
type modelKey struct {
	gens  []modelGen // the last one is the live generation, empty while deleted
	lease int64
}

type modelGen struct {
	created, ver int64
	revs         []revision
}

func newModelKey() *modelKey { return &modelKey{gens: []modelGen{{}}} }

func (m *modelKey) live() *modelGen { return &m.gens[len(m.gens)-1] }

func (m *modelKey) put(rev revision, lease int64) {
	g := m.live()
	if len(g.revs) == 0 {
		g.created = rev.main
	}
	g.revs = append(g.revs, rev)
	g.ver++
	m.lease = lease
}

func (m *modelKey) tombstone(rev revision) {
	m.put(rev, 0)
	m.gens = append(m.gens, modelGen{})
}

// get walks the generations as etcd's keyIndex.get does.
func (m *modelKey) get(atRev int64) (revision, bool) {
	last := len(m.gens) - 1
	for i := last; i >= 0; i-- {
		g := m.gens[i]
		if len(g.revs) == 0 {
			continue
		}
		if i != last && g.revs[len(g.revs)-1].main <= atRev {
			return revision{}, false // deleted at or before atRev
		}
		if g.revs[0].main <= atRev {
			for j := len(g.revs) - 1; j >= 0; j-- {
				if g.revs[j].main <= atRev {
					return g.revs[j], true
				}
			}
		}
	}
	return revision{}, false
}

// compactionPoint is etcd's keyIndex.doCompact.
func (m *modelKey) compactionPoint(atRev int64) (genIdx, revIdx int) {
	for genIdx < len(m.gens)-1 {
		g := m.gens[genIdx]
		if g.revs[len(g.revs)-1].main >= atRev {
			break
		}
		genIdx++
	}
	revIdx = -1
	for j, r := range m.gens[genIdx].revs {
		if r.main <= atRev {
			revIdx = j
		}
	}
	return genIdx, revIdx
}

func (m *modelKey) compact(atRev int64) (dropped []string) {
	genIdx, revIdx := m.compactionPoint(atRev)
	for _, g := range m.gens[:genIdx] {
		for j, r := range g.revs {
			dropped = append(dropped, fmt.Sprint(r, j == len(g.revs)-1))
		}
	}
	g := &m.gens[genIdx]
	if revIdx > 0 {
		for _, r := range g.revs[:revIdx] {
			dropped = append(dropped, fmt.Sprint(r, false))
		}
		g.revs = slices.Clone(g.revs[revIdx:])
	}
	m.gens = slices.Clone(m.gens[genIdx:])
	return dropped
}

func (m *modelKey) keep(atRev int64, available map[revision]struct{}) {
	if len(m.gens) == 1 && len(m.gens[0].revs) == 0 {
		return
	}
	genIdx, revIdx := m.compactionPoint(atRev)
	if revIdx == -1 {
		return
	}
	g := m.gens[genIdx]
	if revIdx == len(g.revs)-1 && genIdx != len(m.gens)-1 {
		return
	}
	available[g.revs[revIdx]] = struct{}{}
}

func (m *modelKey) render() string {
	var s string
	for i, g := range m.gens {
		for j, r := range g.revs {
			if j > 0 {
				s += " "
			}
			s += fmt.Sprint(r.main)
			if r.sub != 0 {
				s += fmt.Sprintf(".%d", r.sub)
			}
		}
		if i != len(m.gens)-1 {
			s += "t | "
		}
	}
	return s
}

// TestKeyIndexMatchesModel drives keyIndex and the generation model
// through the same random puts (some at the same main revision, as in a
// txn), deletes and compactions, and compares every observable: reads at
// every revision, the history, the live generation, what each compaction
// drops and what HashKV keeps.
func TestKeyIndexMatchesModel(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		ki, m := &keyIndex{key: []byte("k")}, newModelKey()
		rev, compacted := revision{main: 1}, int64(0)
		for step := range 60 {
			if rng.IntN(3) == 0 {
				rev.sub++ // another change in the same txn
			} else {
				rev = revision{main: rev.main + 1 + int64(rng.IntN(2))}
			}
			switch op := rng.IntN(10); {
			case op < 6:
				lease := int64(rng.IntN(3))
				ki.put(rev, lease)
				m.put(rev, lease)
			case op < 8:
				live := len(m.live().revs) > 0
				if ki.tombstone(rev) != live {
					t.Fatalf("seed %d step %d: tombstone(%v) = %v, live %v", seed, step, rev, !live, live)
				}
				if live {
					m.tombstone(rev)
				}
			default:
				at := compacted + int64(rng.IntN(int(rev.main-compacted)+1))
				available, want := map[revision]struct{}{}, map[revision]struct{}{}
				ki.keep(at, available)
				m.keep(at, want)
				if !maps.Equal(available, want) {
					t.Fatalf("seed %d step %d: keep(%d) = %v, want %v (history %s)", seed, step, at, available, want, m.render())
				}
				wantDropped := m.compact(at)
				if got := ki.needsCompaction(at); got != (len(wantDropped) > 0) {
					t.Fatalf("seed %d step %d: needsCompaction(%d) = %v, model drops %v", seed, step, at, got, wantDropped)
				}
				var dropped []string
				ki.compact(at, func(r revision, tomb bool) { dropped = append(dropped, fmt.Sprint(r, tomb)) })
				if !slices.Equal(dropped, wantDropped) {
					t.Fatalf("seed %d step %d: compact(%d) dropped %v, want %v", seed, step, at, dropped, wantDropped)
				}
				compacted = at
				if ki.isEmpty() {
					// The index deletes an emptied key; a later put starts afresh.
					if len(m.gens) != 1 || len(m.gens[0].revs) != 0 {
						t.Fatalf("seed %d step %d: emptied, model has %s", seed, step, m.render())
					}
					ki, m = &keyIndex{key: []byte("k")}, newModelKey()
				}
			}
			if got, want := render(ki), m.render(); got != want {
				t.Fatalf("seed %d step %d: history %q, want %q", seed, step, got, want)
			}
			live := m.live()
			if ki.isLive() != (len(live.revs) > 0) || ki.created != live.created || ki.ver != live.ver {
				t.Fatalf("seed %d step %d: live %v created %d version %d, want %+v", seed, step, ki.isLive(), ki.created, ki.ver, *live)
			}
			if ki.isLive() && ki.lease != m.lease {
				t.Fatalf("seed %d step %d: lease %d, want %d", seed, step, ki.lease, m.lease)
			}
			for at := compacted; at <= rev.main+1; at++ {
				gotRev, gotOK := ki.get(at)
				wantRev, wantOK := m.get(at)
				if gotRev != wantRev || gotOK != wantOK {
					t.Fatalf("seed %d step %d: get(%d) = %v %v, want %v %v (history %s)", seed, step, at, gotRev, gotOK, wantRev, wantOK, m.render())
				}
			}
		}
	}
}
