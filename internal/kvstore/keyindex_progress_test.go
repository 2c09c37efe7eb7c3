package kvstore

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestKeyIndexCompactionProgressInvisible checks the two properties of
// keyIndex that a compaction applied in steps would rely on (see
// docs/performance.md, "Compaction without a write stall"): reads and
// HashKV's keep set at any revision >= c are the same whether or not a
// key was already compacted at c; and compacting at c1 then c2 >= c1
// leaves the same history, and drops the same revisions in total, as
// compacting at c2 alone (so a second compaction can restart its pass).
func TestKeyIndexCompactionProgressInvisible(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 11))
		ki := &keyIndex{key: []byte("k")}
		rev := revision{main: 1}
		for range 40 {
			if rng.IntN(3) == 0 {
				rev.sub++
			} else {
				rev = revision{main: rev.main + 1 + int64(rng.IntN(2))}
			}
			if rng.IntN(10) < 7 || !ki.tombstone(rev) {
				ki.put(rev, 0)
			}
		}
		c1 := 1 + int64(rng.IntN(int(rev.main)))
		c2 := c1 + int64(rng.IntN(int(rev.main-c1)+1))

		once := ki.clone(0)
		var droppedOnce []string
		once.compact(c1, func(r revision, tomb bool) { droppedOnce = append(droppedOnce, fmt.Sprint(r, tomb)) })
		for at := c1; at <= rev.main+1; at++ {
			if g, w := fmt.Sprint(once.get(at)), fmt.Sprint(ki.get(at)); g != w {
				t.Fatalf("seed %d: get(%d) after compact(%d) = %s, before %s (history %s)", seed, at, c1, g, w, render(ki))
			}
			got, want := map[revision]struct{}{}, map[revision]struct{}{}
			once.keep(at, got)
			ki.keep(at, want)
			if !maps.Equal(got, want) {
				t.Fatalf("seed %d: keep(%d) after compact(%d) = %v, before %v (history %s)", seed, at, c1, got, want, render(ki))
			}
		}

		twice := once.clone(0)
		droppedTwice := slices.Clone(droppedOnce)
		twice.compact(c2, func(r revision, tomb bool) { droppedTwice = append(droppedTwice, fmt.Sprint(r, tomb)) })
		direct := ki.clone(0)
		var droppedDirect []string
		direct.compact(c2, func(r revision, tomb bool) { droppedDirect = append(droppedDirect, fmt.Sprint(r, tomb)) })
		if render(twice) != render(direct) || !slices.Equal(droppedTwice, droppedDirect) {
			t.Fatalf("seed %d: compact(%d) then (%d) left %s dropping %v; compact(%d) alone left %s dropping %v",
				seed, c1, c2, render(twice), droppedTwice, c2, render(direct), droppedDirect)
		}
	}
}
