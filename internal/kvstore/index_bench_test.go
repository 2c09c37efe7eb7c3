package kvstore

import (
	"fmt"
	"runtime"
	"testing"
)

// indexBenchKeys is the key count of the key index benchmarks: large
// enough for the B-tree to have realistic depth and fill.
const indexBenchKeys = 100_000

// indexBenchKey is key i in bench/engines' format: the zero-padded decimal
// index, 64 bytes long.
func indexBenchKey(i int) []byte { return fmt.Appendf(nil, "%064d", i) }

// loadIndex puts every key once, one revision each, publishing a snapshot
// every 100 puts as a stream of commits would.
func loadIndex(keys [][]byte) (*indexWriter, int64) {
	x := newIndexWriter()
	rev := int64(1)
	for i, k := range keys {
		rev++
		x.put(k, rv(rev), 0)
		if i%100 == 99 {
			x.snapshot()
		}
	}
	x.snapshot()
	return x, rev
}

func indexBenchKeySet(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = indexBenchKey(i)
	}
	return keys
}

// BenchmarkIndexMemory reports the live heap the key index holds per key
// (B-tree, per-key history and the key bytes) for the histories that
// dominate a metadata store: keys written once (a bulk load, or a rebuild
// after a restart), and keys updated several times and then compacted
// down to their latest revision (the steady state).
func BenchmarkIndexMemory(b *testing.B) {
	keys := indexBenchKeySet(indexBenchKeys)
	build := map[string]func() *indexWriter{
		"once": func() *indexWriter { x, _ := loadIndex(keys); return x },
		"updated-compacted": func() *indexWriter {
			x, rev := loadIndex(keys)
			for range 3 {
				for i, k := range keys {
					rev++
					x.put(k, rv(rev), 0)
					if i%100 == 99 {
						x.snapshot()
					}
				}
			}
			x.compact(rev, func(revision, bool) {})
			x.snapshot()
			return x
		},
	}
	for _, name := range []string{"once", "updated-compacted"} {
		b.Run(name, func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				before := liveHeap()
				x := build[name]()
				perKey = float64(liveHeap()-before) / float64(len(keys))
				runtime.KeepAlive(x)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkIndexPut measures the writer's cost per put to an existing key
// with a snapshot published every 100 puts (copy on write included).
func BenchmarkIndexPut(b *testing.B) {
	keys := indexBenchKeySet(indexBenchKeys)
	x, rev := loadIndex(keys)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rev++
		x.put(keys[(i*7919)%len(keys)], rv(rev), 0)
		if i%100 == 99 {
			x.snapshot()
		}
	}
}

// BenchmarkIndexGet measures a reader's point lookup at the current
// revision, the path of every Get.
func BenchmarkIndexGet(b *testing.B) {
	keys := indexBenchKeySet(indexBenchKeys)
	x, rev := loadIndex(keys)
	v := x.snapshot()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		revs, _ := v.revisions(keys[(i*7919)%len(keys)], nil, rev, 0)
		if len(revs) != 1 {
			b.Fatal("key not found")
		}
	}
}

// BenchmarkIndexRange measures a reader's scan of 100 consecutive keys.
func BenchmarkIndexRange(b *testing.B) {
	keys := indexBenchKeySet(indexBenchKeys)
	x, rev := loadIndex(keys)
	v := x.snapshot()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := (i * 7919) % (len(keys) - 100)
		if revs, _ := v.revisions(keys[start], keys[start+100], rev, 0); len(revs) != 100 {
			b.Fatalf("%d keys, want 100", len(revs))
		}
	}
}
