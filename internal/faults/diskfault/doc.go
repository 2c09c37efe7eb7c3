// Package diskfault is the seam through which tests make a member's disk
// misbehave: an fsync that fails or stalls, a write that fails with an I/O
// error or with a full disk.
//
// The WAL (internal/raftnode/wal), the snapshot store (internal/format/raftsnap)
// and the RocksDB engine's Go side (internal/rocksdb: before each batch write
// and each WAL flush with sync) call BeforeWrite before they write and
// BeforeSync before they fsync; the snapshot store's buffered writer
// goes through Writer. In a normal build (no build tag) these do nothing
// and cost nothing: empty functions (Writer returns its argument) that
// the compiler inlines away. In a build with the tag faultinject (make
// build-faults writes bin/metastore-faults) they apply the plan that
// METASTORE_DISKFAULT gives when the process starts:
//
//	METASTORE_DISKFAULT=SPEC       a fixed plan, for the life of the process
//	METASTORE_DISKFAULT=file=PATH  the plan written in PATH, switchable at
//	                               runtime
//
// A SPEC is a comma-separated list of faults; the empty SPEC is a healthy
// disk:
//
//	fsync-error-after=N   the first N syncs succeed, every later one fails
//	                      with EIO
//	fsync-error           every sync fails with EIO (fsync-error-after=0)
//	fsync-delay=D         every sync first waits D (a Go duration: 200ms)
//	write-error           every write fails with EIO
//	nospace               every write fails with ENOSPC
//	only=PART             the faults above hit only files whose path
//	                      contains PART (only=rocksdb: the RocksDB
//	                      engine's; only=snap: the snapshot files)
//
// With file=PATH the file is read again every 50 ms (absent or empty: a
// healthy disk). Each plan taken, the first one included unless it is a
// healthy disk, is acknowledged on standard error in the same grammar,
//
//	diskfault: now fsync-delay=2s
//	diskfault: now healthy
//
// which is how a test knows the member has taken it; a file that does not
// parse is reported once and the plan in force stays. Syncs are counted
// (for fsync-error-after) from the moment a plan takes over, and a sync
// waiting out fsync-delay stops waiting when the plan changes, so a healed
// disk is fast at once. Write the file by renaming a complete one over it:
// a reader could see a file being rewritten in place empty (healthy) for
// a moment.
//
// A failure is injected before the real call, so the data stays where a
// failed call leaves it: after a failed fsync in the page cache, not
// known to be on disk. A member must then stop, naming the file and the
// error, and never acknowledge what it could not make durable (the lesson
// of PostgreSQL's "fsyncgate": after a failed fsync the kernel may drop
// the dirty pages and a retry would falsely succeed). RocksDB's own
// background work (flushes, compactions) happens inside the C++ library
// and is not reached; every write and WAL sync the engine asks for is.
package diskfault
