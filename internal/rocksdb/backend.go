package rocksdb

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"

	"github.com/metastore-io/metastore/internal/faults/diskfault"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// ErrClosed is returned by every operation on a closed Backend and by
// views taken from one.
var ErrClosed = errors.New("rocksdb: backend closed")

// Backend is a kvstore.Backend on RocksDB. See doc.go for the directory
// layout, the durability argument and the concurrency rules.
type Backend struct {
	dir    string // absolute
	opts   Options
	logger *slog.Logger
	lock   *dirLock
	cache  *grocksdb.Cache

	// current is the live database. Readers take a reference on it
	// (acquire); Restore swaps in a new one and drops the Backend's own
	// reference on the old one, which closes when its last reader leaves.
	current atomic.Pointer[generation]
	closed  atomic.Bool

	// compactMu serialises Compact calls; compaction itself runs
	// alongside reads and writes.
	compactMu sync.Mutex

	// statsLog logs Stats every Options.StatsInterval; nil when off.
	statsLog *statsLogger
}

var _ kvstore.Backend = (*Backend)(nil)

// generation is one opened RocksDB directory. refs counts the Backend's
// reference (held while it is current) plus one per live ReadView,
// running Compact, Size call, etc. At zero the database is closed, and
// its directory deleted if a Restore retired it.
type generation struct {
	refs    atomic.Int64
	n       uint64
	path    string
	db      *grocksdb.DB
	write   *grocksdb.WriteOptions
	logger  *slog.Logger
	retired atomic.Bool
	sizes   sizeCache // Size's last read
}

// Open opens (creating it if needed) the engine in dir and returns it with
// the content it had when it was last closed or killed: every batch whose
// Commit returned before a process crash is there (see doc.go).
func Open(dir string, opts Options) (*Backend, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("open rocksdb backend: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open rocksdb backend: %w", err)
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("open rocksdb backend: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "rocksdb", "dir", abs)
	lock, err := lockDir(abs)
	if err != nil {
		return nil, fmt.Errorf("open rocksdb backend: %w", err)
	}
	b := &Backend{
		dir:    abs,
		opts:   opts,
		logger: logger,
		lock:   lock,
		cache:  grocksdb.NewLRUCache(uint64(opts.BlockCacheSize)),
	}
	gen, err := b.openActive()
	if err != nil {
		b.cache.Destroy()
		lock.release()
		return nil, fmt.Errorf("open rocksdb backend: %w", err)
	}
	b.current.Store(gen)
	logger.Info("rocksdb backend open", "db", gen.path, "size", gen.size())
	if opts.StatsInterval > 0 {
		b.statsLog = startStatsLogger(b, opts.StatsInterval)
	}
	return b, nil
}

// openActive opens the database ACTIVE names, or creates the first one.
func (b *Backend) openActive() (*generation, error) {
	n, err := readActive(b.dir)
	if err != nil {
		return nil, err
	}
	// Remove what ACTIVE does not name. Without ACTIVE (n == 0, which no
	// directory is named after) that is every database directory, such as
	// a db-000001 from a first Open killed before it wrote ACTIVE: nothing
	// was committed to it, and it must not be reused.
	if err := removeStrays(b.dir, n); err != nil {
		return nil, err
	}
	fresh := n == 0
	if fresh {
		n = 1
	}
	gen, err := b.openGeneration(n, fresh)
	if err != nil {
		return nil, err
	}
	if fresh {
		if err := writeActive(b.dir, n); err != nil {
			gen.unref()
			return nil, err
		}
	}
	return gen, nil
}

// openGeneration opens db-n. create allows an empty directory to be
// created; otherwise a missing database is an error, not a silent reset.
func (b *Backend) openGeneration(n uint64, create bool) (*generation, error) {
	path := filepath.Join(b.dir, dbName(n))
	native := b.opts.nativeOptions(b.cache)
	native.SetCreateIfMissing(create)
	native.SetErrorIfExists(create)
	db, err := grocksdb.OpenDb(native, path)
	native.Destroy()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	write := grocksdb.NewDefaultWriteOptions()
	write.SetSync(false)    // see doc.go: the WAL reaches the kernel, not the disk
	write.DisableWAL(false) // see doc.go: why the WAL stays on
	gen := &generation{n: n, path: path, db: db, write: write, logger: b.logger}
	gen.refs.Store(1)
	return gen, nil
}

// acquire returns the current generation with a reference the caller
// must drop with unref. A reference can only be taken while the count is
// positive, so a generation already closing is never handed out.
func (b *Backend) acquire() (*generation, error) {
	for {
		if b.closed.Load() {
			return nil, ErrClosed
		}
		gen := b.current.Load()
		if gen.tryRef() {
			return gen, nil
		}
		// gen is closing: either a Restore just replaced it (retry) or
		// the Backend was closed (the check above reports it).
	}
}

// flushWAL writes RocksDB's WAL buffer out and fsyncs it (FlushWAL with
// sync), through the disk-fault seam.
func (g *generation) flushWAL() error {
	if err := diskfault.BeforeSync(g.path); err != nil {
		return err
	}
	return g.db.FlushWAL(true)
}

func (g *generation) tryRef() bool {
	for n := g.refs.Load(); n > 0; n = g.refs.Load() {
		if g.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
	return false
}

// unref drops a reference; the last one closes the database and, for a
// generation a Restore replaced, deletes its directory.
func (g *generation) unref() {
	if g.refs.Add(-1) != 0 {
		return
	}
	g.write.Destroy()
	g.db.Close()
	if g.retired.Load() {
		if err := os.RemoveAll(g.path); err != nil {
			// Open removes it next time; nothing is lost meanwhile.
			g.logger.Warn("remove replaced database", "db", g.path, "err", err)
		}
	}
}

// NewBatch starts an empty write batch on the live database.
func (b *Backend) NewBatch() kvstore.Batch {
	return newBatch(b)
}

// ReadView returns a point-in-time view of everything committed so far.
// On a closed Backend the view fails every call with ErrClosed.
func (b *Backend) ReadView() kvstore.ReadView {
	gen, err := b.acquire()
	if err != nil {
		return failedView{err: err}
	}
	return newReadView(gen)
}

// Sync makes every committed batch durable against power loss by
// fsyncing the RocksDB WAL. Commit does not (see doc.go); call Sync before
// discarding Raft log entries the engine may still need for replay.
func (b *Backend) Sync() error {
	gen, err := b.acquire()
	if err != nil {
		return err
	}
	defer gen.unref()
	if err := gen.flushWAL(); err != nil {
		return fmt.Errorf("rocksdb sync: %w", err)
	}
	return nil
}

// Size returns the bytes the engine holds: SST files (including ones kept
// alive only by open views) plus memtables.
func (b *Backend) Size() int64 {
	gen, err := b.acquire()
	if err != nil {
		return 0
	}
	defer gen.unref()
	return gen.sizes.get(gen.size)
}

// SizeInUse returns RocksDB's estimate of the live data in SST files plus
// the memtables, capped at Size. The difference from Size is what a
// Compact can give back: overwritten and deleted entries, obsolete files.
func (b *Backend) SizeInUse() int64 {
	gen, err := b.acquire()
	if err != nil {
		return 0
	}
	defer gen.unref()
	return min(gen.intProperty("rocksdb.estimate-live-data-size")+
		gen.intProperty("rocksdb.cur-size-all-mem-tables"), gen.size())
}

func (g *generation) size() int64 {
	return g.intProperty("rocksdb.total-sst-files-size") +
		g.intProperty("rocksdb.cur-size-all-mem-tables")
}

func (g *generation) intProperty(name string) int64 {
	v, ok := g.db.GetIntProperty(name)
	if !ok {
		return 0
	}
	return int64(v)
}

// Close releases the engine. The database closes as soon as no ReadView
// uses it; ReadViews still open are reported as an error (the contract
// requires them released first) and the database closes with the last of
// them.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if b.statsLog != nil {
		// Before the cache and the database go: a reading in progress
		// holds a reference, and no new one can start once closed is set.
		b.statsLog.close()
	}
	gen := b.current.Load()
	// Read before dropping our reference: afterwards gen may be closed.
	// The count only feeds the error message.
	open := gen.refs.Load() - 1
	gen.unref()
	var err error
	if open > 0 {
		err = fmt.Errorf("rocksdb: closed with %d read views or operations still open", open)
	}
	b.cache.Destroy()
	if lerr := b.lock.release(); lerr != nil && err == nil {
		err = fmt.Errorf("rocksdb: release lock: %w", lerr)
	}
	b.logger.Info("rocksdb backend closed")
	return err
}
