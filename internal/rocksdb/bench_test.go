package rocksdb

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// revKey builds a key shaped like the MVCC layer's: 'r' + 8-byte main +
// 8-byte sub revision, big endian.
func revKey(buf []byte, main, sub uint64) []byte {
	buf = append(buf[:0], 'r')
	buf = binary.BigEndian.AppendUint64(buf, main)
	return binary.BigEndian.AppendUint64(buf, sub)
}

func benchBackend(b *testing.B, revisions int) *Backend {
	opts := DefaultOptions()
	opts.BlockCacheSize = 64 << 20
	be, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	value := make([]byte, 256)
	var key []byte
	for main := 0; main < revisions; {
		bt := be.NewBatch()
		for end := min(main+1000, revisions); main < end; main++ {
			key = revKey(key, uint64(main+1), 0)
			bt.Put(key, value)
		}
		if err := bt.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return be
}

// BenchmarkCommit: one batch of 100 revisions with 256-byte values, as an
// apply loop committing a burst of puts produces.
func BenchmarkCommit(b *testing.B) {
	be := benchBackend(b, 0)
	value := make([]byte, 256)
	var key []byte
	main := uint64(1)
	b.SetBytes(100 * (17 + 256))
	b.ReportAllocs()
	for b.Loop() {
		bt := be.NewBatch()
		for range 100 {
			key = revKey(key, main, 0)
			bt.Put(key, value)
			main++
		}
		if err := bt.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	const revisions = 100_000
	be := benchBackend(b, revisions)
	v := be.ReadView()
	defer v.Release()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var key []byte
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			key = revKey(key, uint64(rng.IntN(revisions)+1), 0)
			if _, ok, err := v.Get(key); err != nil || !ok {
				b.Fatalf("Get: %v, %v", ok, err)
			}
		}
	})
}

// BenchmarkAscend scans 1000 consecutive revisions.
func BenchmarkAscend(b *testing.B) {
	const revisions, span = 100_000, 1000
	be := benchBackend(b, revisions)
	v := be.ReadView()
	defer v.Release()
	var start, end []byte
	b.ReportAllocs()
	for b.Loop() {
		first := uint64(rand.IntN(revisions-span) + 1)
		start, end = revKey(start, first, 0), revKey(end, first+span, 0)
		n := 0
		if err := v.Ascend(start, end, func(_, _ []byte) bool { n++; return true }); err != nil || n != span {
			b.Fatalf("Ascend: %d keys, %v", n, err)
		}
	}
}

// BenchmarkReadView is the per-Commit cost the MVCC layer pays to publish
// a new view.
func BenchmarkReadView(b *testing.B) {
	be := benchBackend(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		be.ReadView().Release()
	}
}
