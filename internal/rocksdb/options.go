package rocksdb

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/linxGnu/grocksdb"
)

// Compression names the block compression RocksDB applies to SST files.
type Compression string

// The compressions Open accepts. All four are linked into Debian's
// librocksdb; TestCompressions opens a database with each.
const (
	CompressionNone   Compression = "none"
	CompressionSnappy Compression = "snappy"
	CompressionLZ4    Compression = "lz4"
	CompressionZstd   Compression = "zstd"
)

// ParseCompression maps a flag value ("none", "snappy", "lz4", "zstd",
// case-insensitive) to a Compression.
func ParseCompression(s string) (Compression, error) {
	c := Compression(strings.ToLower(strings.TrimSpace(s)))
	if _, err := c.native(); err != nil {
		return "", err
	}
	return c, nil
}

func (c Compression) native() (grocksdb.CompressionType, error) {
	switch c {
	case CompressionNone:
		return grocksdb.NoCompression, nil
	case CompressionSnappy:
		return grocksdb.SnappyCompression, nil
	case CompressionLZ4:
		return grocksdb.LZ4Compression, nil
	case CompressionZstd:
		return grocksdb.ZSTDCompression, nil
	}
	return 0, fmt.Errorf("unknown compression %q (want none, snappy, lz4 or zstd)", string(c))
}

// Options tunes the engine. Start from DefaultOptions; Open rejects values
// out of range instead of silently replacing them.
type Options struct {
	// Logger receives open/restore/compaction progress. Nil discards.
	Logger *slog.Logger

	// BlockCacheSize is the LRU cache, in bytes, for uncompressed data
	// blocks and for index and filter blocks (both are charged to the cache
	// so that it bounds the engine's read memory). Must be > 0.
	// Default 64 MiB. The cache only has to keep the index and filter
	// blocks (a few MiB per million revisions) and the hot data blocks:
	// every SST block is also in the kernel's page cache, compressed, which
	// the kernel gives back when memory is short, while the block cache is
	// resident and never shrinks. A miss that the page cache serves costs
	// a pread and an lz4 decode of one block, microseconds against the
	// tens a Range request spends in gRPC and the MVCC layer; a cache as
	// large as the data set mostly duplicates the page cache in the
	// process's resident memory.
	BlockCacheSize int64

	// BloomBitsPerKey sizes the whole-key Bloom filter of each SST file;
	// 0 disables filters. Default 10 (about 1% false positives). The MVCC
	// layer only asks for revisions its key index knows exist, so filters
	// are built for every level but the last (optimize_filters_for_hits):
	// they only save work where a Get can miss, which is the upper levels.
	BloomBitsPerKey float64

	// Compression is applied to every level. Default lz4: revision values
	// are marshaled protobufs with repetitive key prefixes, lz4 shrinks
	// them well at a decode cost low enough for the read path.
	Compression Compression

	// WriteBufferSize is the size, in bytes, of one memtable before it is
	// frozen and flushed to an L0 file. Must be >= 64 KiB. Default 16 MiB,
	// a quarter of RocksDB's usual: the live memtable is resident however
	// full it is (and MaxWriteBuffers of them during a flush backlog), and
	// once 16 MiB have been written it is as full as it gets, on every
	// member, whatever the data set: 32 MiB peaked 9 MiB higher than 16 MiB
	// for 100,000 puts of 256 B (130 against 121 MiB resident, etcd 93;
	// docs/performance.md, "Peak memory"), with CPU per put within the
	// noise. The price, more flushes, is small here: revision keys arrive
	// in ascending order, so flushed files hold nearly disjoint key ranges,
	// and flushing is I/O in the background; four memtables (64 MiB) still
	// absorb a burst while one flushes (TestOverloadMaxSizePuts, 64
	// clients putting 1.5 MiB values: 102 puts in 4 s, 121 with 32 MiB,
	// one run each on a loaded machine).
	WriteBufferSize int64

	// MaxWriteBuffers is how many memtables (the active one plus frozen
	// ones waiting for flush) may exist before writes stall. Must be >= 2.
	// Default 4, so that a burst of applies keeps going while one flush
	// runs; frozen memtables only exist while a flush is behind.
	MaxWriteBuffers int

	// MaxBackgroundJobs bounds concurrent flushes plus compactions. Must be
	// >= 1. Default 4; flushes are I/O bound, so more jobs than cores is
	// fine.
	MaxBackgroundJobs int

	// StatsInterval, when positive, turns on RocksDB's statistics object
	// (tickers and histograms: block cache hits and misses, stall time,
	// get, write and seek times) and logs Backend.Stats at Info level
	// every interval. Default 0: off, because the statistics cost some
	// CPU on every operation; Stats still returns the per-level and
	// stall figures RocksDB keeps anyway. Must be >= 0.
	StatsInterval time.Duration
}

// DefaultOptions returns the defaults documented on each Options field.
func DefaultOptions() Options {
	return Options{
		BlockCacheSize:    64 << 20,
		BloomBitsPerKey:   10,
		Compression:       CompressionLZ4,
		WriteBufferSize:   16 << 20,
		MaxWriteBuffers:   4,
		MaxBackgroundJobs: 4,
	}
}

// minWriteBufferSize keeps RocksDB from flushing after every batch.
const minWriteBufferSize = 64 << 10

// targetFileSize is the size of the SST files compactions write.
const targetFileSize = 64 << 20

// metadataBlockSize is the size of one partition of an SST's index or
// filter: about a data block, so that one is as cheap to cache and to
// evict as a data block.
const metadataBlockSize = 4 << 10

func (o Options) validate() error {
	if o.BlockCacheSize <= 0 {
		return fmt.Errorf("block cache size %d: must be positive", o.BlockCacheSize)
	}
	if o.BloomBitsPerKey < 0 || o.BloomBitsPerKey > 64 {
		return fmt.Errorf("bloom bits per key %v: must be in [0, 64]", o.BloomBitsPerKey)
	}
	if _, err := o.Compression.native(); err != nil {
		return err
	}
	if o.WriteBufferSize < minWriteBufferSize {
		return fmt.Errorf("write buffer size %d: must be at least %d", o.WriteBufferSize, minWriteBufferSize)
	}
	if o.MaxWriteBuffers < 2 {
		return fmt.Errorf("max write buffers %d: must be at least 2", o.MaxWriteBuffers)
	}
	if o.MaxBackgroundJobs < 1 {
		return fmt.Errorf("max background jobs %d: must be at least 1", o.MaxBackgroundJobs)
	}
	if o.StatsInterval < 0 {
		return fmt.Errorf("stats interval %v: must not be negative", o.StatsInterval)
	}
	return nil
}

// nativeOptions builds the RocksDB options for one database directory.
// cache is shared by every database the Backend opens (the live one and a
// restore's staging one). The caller destroys the result after OpenDb,
// which copies what it needs.
func (o Options) nativeOptions(cache *grocksdb.Cache) *grocksdb.Options {
	compression, _ := o.Compression.native() // validated by Open

	table := grocksdb.NewDefaultBlockBasedTableOptions()
	table.SetBlockCache(cache)
	table.SetCacheIndexAndFilterBlocks(true)
	table.SetPinL0FilterAndIndexBlocksInCache(true)
	// Partitioned index and filters: each SST's index and filter are cut
	// into blocks of about metadataBlockSize, cached one by one under a
	// small top-level index pinned with the table. With one index block
	// per file, a large compacted file had an index block too large for
	// a shard of the block cache: RocksDB read, checksummed and decoded
	// the whole index on every Get (docs/performance.md, "A Get that
	// read a whole index").
	table.SetIndexType(grocksdb.KTwoLevelIndexSearchIndexType)
	table.SetPartitionFilters(true)
	table.SetMetadataBlockSize(metadataBlockSize)
	table.SetPinTopLevelIndexAndFilter(true) // RocksDB's default; the above relies on it
	if o.BloomBitsPerKey > 0 {
		// The table options take ownership of the policy.
		table.SetFilterPolicy(grocksdb.NewBloomFilterFull(o.BloomBitsPerKey))
		table.SetWholeKeyFiltering(true)
	}

	opts := grocksdb.NewDefaultOptions()
	opts.SetBlockBasedTableFactory(table)
	opts.SetCompression(compression)
	opts.SetOptimizeFiltersForHits(o.BloomBitsPerKey > 0)
	opts.SetWriteBufferSize(uint64(o.WriteBufferSize))
	opts.SetMaxWriteBufferNumber(o.MaxWriteBuffers)
	opts.SetMaxBackgroundJobs(o.MaxBackgroundJobs)
	// Size levels from the bottom up: space amplification stays near 1.1
	// however large the data set grows.
	opts.SetLevelCompactionDynamicLevelBytes(true)
	// Compaction output files of 64 MiB (RocksDB's default), whatever the
	// memtable size: fewer files to open and index than one per flush.
	opts.SetTargetFileSizeBase(targetFileSize)
	// Point-in-time recovery (RocksDB's default, pinned here because the
	// crash-safety argument in doc.go depends on it): WAL replay stops at
	// the first torn or corrupt record, so a batch is replayed whole or
	// not at all, and nothing after it is replayed.
	opts.SetWALRecoveryMode(grocksdb.PointInTimeRecovery)
	// Write back SST and WAL data in the background in 1 MiB steps, so
	// that a flush or Sync never finds hundreds of MiB of dirty pages.
	opts.SetBytesPerSync(1 << 20)
	opts.SetWALBytesPerSync(1 << 20)
	// RocksDB's own LOG file: warnings only, few and small files.
	opts.SetInfoLogLevel(grocksdb.WarnInfoLogLevel)
	opts.SetKeepLogFileNum(2)
	opts.SetMaxLogFileSize(8 << 20)
	if o.StatsInterval > 0 {
		opts.EnableStatistics()
	}

	table.Destroy()
	return opts
}
