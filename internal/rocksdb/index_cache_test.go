package rocksdb

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/linxGnu/grocksdb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// perfBlockReadCount is rocksdb_block_read_count in RocksDB's C API's
// perf-context metric enum: blocks read from a file rather than found in
// the block cache.
const perfBlockReadCount = 2

// TestGetReadsNoBlockOnceCached: once a Get has brought what it needs
// into the block cache, the same Get again reads no block from the file,
// however large the SST's index. With a single index block per SST, an
// index larger than a shard of the block cache was never cached: every
// Get read, checksummed and decoded the whole index (610 µs a Get for a
// 52 MiB file under the default 64 MiB cache, docs/performance.md, "A Get
// that read a whole index"). The cache here is 64 KiB, one shard, smaller
// than the unpartitioned index of the 60,000 records written; partitions
// of metadataBlockSize fit.
func TestGetReadsNoBlockOnceCached(t *testing.T) {
	opts := testOptions(t)
	opts.BlockCacheSize = 64 << 10
	b, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()

	const records = 60000
	value := bytes.Repeat([]byte{'v'}, 256)
	for start := int64(1); start <= records; start += 1000 {
		batch := b.NewBatch()
		for rev := start; rev < start+1000; rev++ {
			batch.Put(kvstore.RevisionKey(rev, 0, false), value)
		}
		if err := batch.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	}
	// One compacted file at the bottom level, as on a member that has
	// written a few hundred MiB.
	if err := b.Compact(); err != nil {
		t.Fatalf("Compact: %v", err)
	}

	v := b.ReadView()
	defer v.Release()
	key := kvstore.RevisionKey(records/2, 0, false)

	// The perf context is per OS thread: keep the Gets on this one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	grocksdb.SetPerfLevel(grocksdb.KEnableCount)
	defer grocksdb.SetPerfLevel(grocksdb.KDisable)
	perf := grocksdb.NewPerfContext()
	defer perf.Destroy()

	if _, ok, err := v.Get(key); err != nil || !ok {
		t.Fatalf("first Get: ok=%v err=%v", ok, err)
	}
	perf.Reset()
	const gets = 100
	for i := 0; i < gets; i++ {
		if _, ok, err := v.Get(key); err != nil || !ok {
			t.Fatalf("Get %d: ok=%v err=%v", i, ok, err)
		}
	}
	if reads := perf.Metric(perfBlockReadCount); reads != 0 {
		t.Fatalf("%d Gets of a cached record read %d blocks from the file; want 0 (an index block that does not fit the cache is read on every Get)", gets, reads)
	}
}
