// Package rocksdb is the persistent storage engine: a kvstore.Backend on
// RocksDB (github.com/linxGnu/grocksdb over Debian's librocksdb 7.8, via
// cgo). Like every Backend it stores opaque keys in byte order and knows
// nothing of revisions; the MVCC layer's keys ('r' + 8-byte main + 8-byte
// sub revision, mostly appended in ascending order, plus a few meta and
// aux keys) all live in RocksDB's default column family under the
// bytewise comparator.
//
// # Directory layout
//
// Open(dir) owns dir. Example, during the second Restore of its life:
//
//	dir/
//	  LOCK                flock held by the open Backend (one process per dir)
//	  ACTIVE              "db-000002\n": the live database
//	  db-000002/          RocksDB: MANIFEST-*, CURRENT, *.sst, *.log (WAL), OPTIONS-*, LOG
//	  db-000003.ingest/   SST files decoded from the image being restored
//	  db-000003/          the database being built from them
//
// ACTIVE is the only commit point. It is replaced by writing ACTIVE.tmp,
// fsyncing it, renaming it over ACTIVE and fsyncing dir, so a crash leaves
// the old or the new name, never a torn one. Open removes every db-* or
// ACTIVE.tmp entry that ACTIVE does not name (an interrupted Restore, or a
// first Open killed before it wrote ACTIVE, in which case nothing was
// committed yet). A database directory ACTIVE names but that is missing
// is an error, never a silent reset to empty.
//
// # Commit, and why no fsync per batch is crash-safe
//
// A Batch is one RocksDB WriteBatch, applied by one DB.Write with the WAL
// on and sync off. What that guarantees:
//
//   - Atomic visibility. A WriteBatch is inserted into one memtable under
//     consecutive sequence numbers (memtables are switched only between
//     writes), and a ReadView is a RocksDB snapshot, i.e. a sequence
//     number: a view sees all of a batch or none of it.
//   - Process crash (kill -9, panic, OOM kill). DB.Write returns after
//     RocksDB has handed the batch's WAL record to the kernel with
//     write(2) (manual_wal_flush is off), so the record is in the page
//     cache, which outlives the process; Open replays it. Every batch
//     whose Commit returned is there after a restart. TestKillMidCommit
//     checks exactly this by SIGKILLing a committing child process.
//   - Kernel crash or power loss. The unsynced WAL tail may be lost or
//     torn. Each WAL record carries a checksum, and recovery runs in
//     point-in-time mode (set explicitly in Options): replay stops at the
//     first bad record, so the database comes back as of the end of some
//     batch k: batches 1..k whole, nothing after. Flushes cannot break
//     that order: a memtable is flushed whole, flush results are installed
//     in the MANIFEST in memtable order, and a WAL file is deleted only
//     once every memtable it fed is flushed. Which k that is, the MVCC
//     layer reads from the consistent index it writes in every batch, and
//     it replays the Raft log (fsynced, the durable record) from k+1.
//     That needs the Raft log to still hold k+1: before the Raft layer
//     discards entries, it calls Persist on a view (or Backend.Sync),
//     which fsyncs the WAL and so makes everything committed so far
//     survive power loss too.
//
// Why keep the WAL at all, given the Raft log? With the WAL off the
// argument above still yields a whole-batch prefix (memtables are
// flushed in order), but even a plain process crash loses every memtable
// not yet flushed, up to MaxWriteBuffers x WriteBufferSize (64 MiB by
// default); a restart must then replay that much of the Raft log, and the
// Raft layer would have to keep its log back to RocksDB's last flush,
// which it cannot see. The WAL costs one buffered sequential write(2) per
// Commit and no fsync; BenchmarkCommit could not tell it from WAL-off
// beyond noise (about 10%).
//
// # Reads and concurrency
//
// The Backend's live database is a generation: an opened RocksDB
// directory with a reference count. The Backend holds one reference while
// the generation is current; every ReadView, Size, Sync, Compact and
// Checkpoint holds one while it runs. Restore swaps in a new generation
// and drops the Backend's reference on the old one, which closes (and is
// deleted) when its last view is released, so a long WriteTo streaming a
// Raft snapshot to a follower is never cut short. Taking a reference
// never blocks: it is a compare-and-swap that only succeeds on a positive
// count.
//
// A ReadView is a RocksDB snapshot plus that reference. Its methods are
// safe for concurrent use (the MVCC layer shares one view among all
// readers of a revision). Get copies the value into Go memory; Ascend and
// Descend run a RocksDB iterator bounded by iterate_lower_bound and
// iterate_upper_bound, and hand fn slices that point straight into the
// iterator's buffers, valid until fn returns. Only a nil end is
// unbounded; an empty or inverted interval is empty. A nil end in
// Batch.DeleteRange is unbounded as well.
//
// # Raft snapshots
//
// The engine holds the state durably once its WAL is synced, so a Raft
// snapshot of a RocksDB member copies nothing: ReadViews implement
// kvstore.PersistentView, whose Persist is DB.FlushWAL(sync), and the
// MVCC store's snapshot image passes that on (raftnode.PersistentImage);
// raftnode then writes a snapshot file holding only a marker (see
// raftnode's doc, "Snapshots persisted in place"). A full image is
// written, with WriteTo, only when a follower needs one, and Restore
// installs it on the follower. A restart reads no image at all: Open
// replays RocksDB's own WAL, the MVCC layer reads its consistent index
// and rebuilds its key index with one AscendOnce pass (kvstore.BulkReader)
// over the revisions, and Raft replays the entries after that index.
//
// AscendOnce, and WriteTo, iterate with fill_cache off: a pass over every
// block must neither evict what readers use nor leave the block cache full
// (up to BlockCacheSize resident) of blocks nobody asked for.
//
// # Image format (ReadView.WriteTo, Backend.Restore)
//
// A stream of every key in order, framed and checksummed in
// internal/format/kvimage's format with this engine's magic "MSROCKS\x00" (see
// that package for the byte layout and a worked example). One content
// has exactly one image. Restore decodes the stream into sorted SST files
// (each about WriteBufferSize) in a staging directory, verifies the count,
// the CRC and that the stream ends right after it, and only then ingests
// the files into a fresh database and switches ACTIVE (see the layout).
// On any error the staging files are deleted and the old content stays,
// on disk and in memory. Corrupt lengths cannot make the decoder allocate
// more than a megabyte ahead of the bytes actually received.
//
// Checkpoint(dir) is the cheap local alternative: a RocksDB checkpoint
// (hard-linked SST files) laid out as above, which Open(dir) serves.
//
// # Sizes and compaction
//
// Size is rocksdb.total-sst-files-size + rocksdb.cur-size-all-mem-tables;
// SizeInUse is rocksdb.estimate-live-data-size plus the memtables, capped
// at Size. Compact (Maintenance.Defragment) is a manual compaction of the
// whole key space, bottommost level included, which drops overwritten
// and deleted entries and range tombstones; it logs its progress every
// ten seconds and does not stop automatic compactions, so commits never
// stall behind it.
//
// # Tuning
//
// Options holds the knobs (see each field for its default and why):
// BlockCacheSize 64 MiB, shared by all generations and charged with
// index and filter blocks (the kernel's page cache holds the SST files
// too); BloomBitsPerKey 10, whole-key filters skipped on the last level
// because the MVCC layer only reads revisions it knows exist; Compression
// lz4; WriteBufferSize 16 MiB; MaxWriteBuffers 4; MaxBackgroundJobs 4;
// StatsInterval 0 (RocksDB's statistics object off; Backend.Stats still
// reads rocksdb.stats, and a positive interval logs both, stats.go).
// Fixed choices: partitioned indexes and filters (4 KiB partitions, each
// cached like a data block, under a pinned top-level index: a whole-file
// index can outgrow a cache shard and is then read again on every Get),
// dynamic level sizing (space amplification near 1.1),
// 64 MiB compaction output files, 1 MiB bytes_per_sync for SST and WAL
// writeback, RocksDB's own LOG at warning level.
//
// Debian's librocksdb is built with assertions enabled, which turn some
// argument errors into process aborts: the engine therefore never passes
// RocksDB an inverted DeleteRange, an empty iterator bound, or SST keys
// out of order (FuzzRestore found the last one).
package rocksdb
