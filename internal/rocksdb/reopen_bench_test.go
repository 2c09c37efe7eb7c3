package rocksdb_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/rocksdb"
)

// reopenKeys is the data set of BenchmarkReopenStore: the restart
// target is 1,000,000 keys of 64 bytes with 256-byte values. Set
// METASTORE_BENCH_KEYS to try another size.
func reopenKeys(b *testing.B) int {
	if s := os.Getenv("METASTORE_BENCH_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("METASTORE_BENCH_KEYS=%q: want a positive integer", s)
		}
		return n
	}
	return 1_000_000
}

// BenchmarkReopenStore measures what a restart of a RocksDB member costs
// before raft replay: opening the engine and rebuilding the key index
// (kvstore.Open) over reopenKeys keys, one revision each.
func BenchmarkReopenStore(b *testing.B) {
	dir := b.TempDir()
	keys := reopenKeys(b)
	opts := rocksdb.DefaultOptions()
	loadReopenData(b, dir, opts, keys)

	b.ResetTimer()
	for b.Loop() {
		be, err := rocksdb.Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		s, err := kvstore.Open(be, kvstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if got := s.Rev(); got != int64(keys)+1 {
			b.Fatalf("reopened at revision %d, want %d", got, keys+1)
		}
		b.StopTimer()
		// What the key index costs in Go heap (the engine's own memory
		// is C memory, outside it).
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		if err := be.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// loadReopenData writes keys keys (64-byte, with random 256-byte values)
// through a store into a new engine in dir, 1000 puts per commit.
func loadReopenData(b *testing.B, dir string, opts rocksdb.Options, keys int) {
	be, err := rocksdb.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	s, err := kvstore.Open(be, kvstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 256)
	start := time.Now()
	for i := 0; i < keys; {
		for end := min(i+1000, keys); i < end; i++ {
			for j := range value {
				value[j] = byte(rng.Uint32())
			}
			key := fmt.Appendf(nil, "%064d", i)
			if _, err := s.Put(&pb.PutRequest{Key: key, Value: value}); err != nil {
				b.Fatal(err)
			}
		}
		s.SetConsistentIndex(uint64(i), 1)
		if _, err := s.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("loaded %d keys in %v", keys, time.Since(start))
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if err := be.Close(); err != nil {
		b.Fatal(err)
	}
}
