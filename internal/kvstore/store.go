package kvstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// LeaseTable is what the store needs from the lease subsystem. The store
// calls it only from the apply goroutine (and from Open/Restore).
type LeaseTable interface {
	// LeaseExists reports whether the lease is granted and not revoked.
	LeaseExists(id int64) bool
	// Attach records that key now carries lease id.
	Attach(id int64, key []byte)
	// Detach records that key no longer carries lease id.
	Detach(id int64, key []byte)
}

// Options configures a Store.
type Options struct {
	// Logger receives the store's log lines; nil discards them.
	Logger *slog.Logger
	// Leases is the lease table; nil means no lease exists, so every Put
	// with a nonzero lease fails with ErrLeaseNotFound.
	Leases LeaseTable
	// Metrics receives the store's collectors (etcd's mvcc and backend
	// commit metrics); nil registers none.
	Metrics prometheus.Registerer
	// MaxResponseBytes bounds the encoded key-values of the response to a
	// Range or read-only Txn; a read over it fails with a
	// ResponseTooLargeError giving its full size (see rangesize.go). 0:
	// no bound.
	MaxResponseBytes int64
	// MaxResponseMemory bounds the memory the key-values of one such
	// response may take while it is built; a read over it stops at once
	// with a ResponseTooLargeError. 0: no bound.
	MaxResponseMemory int64
	// CompactionStep is about how many old revisions a compaction
	// deletes per Commit (whole keys at a time, see compact.go); 0:
	// DefaultCompactionStep.
	CompactionStep int
}

// Store is the MVCC key-value store. See doc.go for the model and the
// concurrency rules.
type Store struct {
	logger  *slog.Logger
	leases  LeaseTable
	backend Backend
	m       *metrics
	// maxResponseBytes and maxResponseMemory are Options'.
	maxResponseBytes, maxResponseMemory int64
	// compactionStep is Options.CompactionStep, defaulted.
	compactionStep int

	// current is the image readers use: everything as of the last Commit.
	current atomic.Pointer[snapshot]
	closed  atomic.Bool

	w writer // apply goroutine only
}

// snapshot is one committed image: a backend view, the key index that
// describes it and the revisions it is at. Every field is immutable. refs
// counts the store's own reference (while it is current) and the readers
// using it; the backend view is released when it drops to zero.
type snapshot struct {
	refs       atomic.Int64
	view       ReadView
	keys       indexView // the key index as of rev
	rev        int64
	compactRev int64
	// finishedRev is the last compaction whose old records are all
	// deleted; below compactRev while that compaction has records left
	// to delete, which readers then leave out (compacting).
	finishedRev int64
	// appliedIndex and appliedTerm are the consistent index: the last raft
	// entry whose effects this image holds.
	appliedIndex uint64
	appliedTerm  uint64
	liveKeys     int64 // keys that exist at rev
}

// compacting reports whether the image still holds records that its
// compacted revision made unreachable (compact.go).
func (snap *snapshot) compacting() bool { return snap.finishedRev != snap.compactRev }

func (snap *snapshot) release() {
	if snap.refs.Add(-1) == 0 {
		snap.view.Release()
	}
}

// writer is the state of the apply goroutine: it runs ahead of the current
// snapshot by the changes not yet committed.
type writer struct {
	index      *indexWriter
	rev        int64
	compactRev int64
	// finishedRev is the last compaction whose records are all deleted
	// (-1: none); cursor, while compactRev is above it, is where the
	// next step of its physical half starts (compact.go).
	finishedRev  int64
	cursor       *compactCursor
	appliedIndex uint64
	appliedTerm  uint64
	appliedDirty bool
	batch        Batch
	// pending holds the values written since the last Commit, so that
	// apply-side reads see them before they are in a backend view.
	pending map[revision]*mvccpb.KeyValue
	events  []mvccpb.Event
	// recordScratch is reused to encode each tombstone before the batch
	// copies it (encodeKeyValue); a put's record is the backend's to
	// keep (marshalKeyValue).
	recordScratch []byte
	txn           *TxnWrite // the open write transaction, if any
	// failed is set when a Commit or Restore failed halfway: the index
	// no longer matches the backend and the store refuses further work.
	failed error
}

// Open loads the store from b: it reads the meta keys, rebuilds the key
// index from the stored revisions and attaches live leased keys to
// opts.Leases.
func Open(b Backend, opts Options) (*Store, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{logger: logger, leases: opts.Leases, backend: b,
		maxResponseBytes: opts.MaxResponseBytes, maxResponseMemory: opts.MaxResponseMemory,
		compactionStep: opts.CompactionStep}
	if s.compactionStep <= 0 {
		s.compactionStep = DefaultCompactionStep
	}
	if err := s.load(); err != nil {
		return nil, fmt.Errorf("open kvstore: %w", err)
	}
	m, err := newMetrics(s, opts.Metrics)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// Close releases the store's reference to its current image. Readers that
// still hold one finish normally; later reads fail with ErrClosed. Close
// does not close the backend.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.current.Load().release()
	return nil
}

// acquire returns the current snapshot with a reference the caller must
// release. A reference can only be taken while the count is positive, so a
// snapshot whose view was released is never handed out.
func (s *Store) acquire() (*snapshot, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	for {
		snap := s.current.Load()
		for n := snap.refs.Load(); n > 0; n = snap.refs.Load() {
			if snap.refs.CompareAndSwap(n, n+1) {
				return snap, nil
			}
		}
		if s.current.Load() == snap {
			// Dropped to zero while still current: Close did that after
			// the check above.
			return nil, ErrClosed
		}
	}
}

// install makes view (which must hold every committed batch) and the
// writer's index the current image.
func (s *Store) install(view ReadView) {
	w := &s.w
	snap := &snapshot{
		view:         view,
		keys:         w.index.snapshot(),
		rev:          w.rev,
		compactRev:   w.compactRev,
		finishedRev:  w.finishedRev,
		appliedIndex: w.appliedIndex,
		appliedTerm:  w.appliedTerm,
		liveKeys:     w.index.live,
	}
	snap.refs.Store(1)
	if old := s.current.Swap(snap); old != nil {
		old.release()
	}
}

func (s *Store) usable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.w.failed != nil {
		return s.w.failed
	}
	return nil
}

// applyReader reads the apply goroutine's view: committed state plus the
// changes buffered since.
func (s *Store) applyReader() *kvReader {
	return &kvReader{index: s.w.index.indexView, values: s.current.Load().view, pending: s.w.pending, compactRev: s.w.compactRev}
}

// Rev is the store revision as of the last Commit.
func (s *Store) Rev() int64 { return s.current.Load().rev }

// CompactRev is the compacted revision as of the last Commit, -1 if the
// store was never compacted.
func (s *Store) CompactRev() int64 { return s.current.Load().compactRev }

// FinishedCompactRev is, as of the last Commit, the last compaction whose
// old revisions are all deleted from the backend: below CompactRev while
// a compaction is still deleting them (-1: none finished).
func (s *Store) FinishedCompactRev() int64 { return s.current.Load().finishedRev }

// ConsistentIndex is the raft index and term of the last entry whose
// effects are in the committed image.
func (s *Store) ConsistentIndex() (index, term uint64) {
	snap := s.current.Load()
	return snap.appliedIndex, snap.appliedTerm
}

// Size is the backend's total size in bytes.
func (s *Store) Size() int64 { return s.backend.Size() }

// SizeInUse is the part of Size holding live data.
func (s *Store) SizeInUse() int64 { return s.backend.SizeInUse() }

// SetConsistentIndex records the raft entry whose effects the buffered
// writes complete; the next Commit stores it in the same batch.
func (s *Store) SetConsistentIndex(index, term uint64) {
	s.w.appliedIndex, s.w.appliedTerm, s.w.appliedDirty = index, term, true
}

func checkAuxBucket(bucket byte) {
	if bucket == bucketRevision || bucket == bucketMeta {
		panic(fmt.Sprintf("kvstore: bucket %q is reserved for the MVCC store", bucket))
	}
}

// PutAux buffers a write of key in another subsystem's bucket; it becomes
// durable and visible at the next Commit, atomically with the MVCC
// changes. Using the store's own buckets ('r', 'm') panics.
func (s *Store) PutAux(bucket byte, key, value []byte) {
	checkAuxBucket(bucket)
	s.w.batch.Put(append([]byte{bucket}, key...), value)
}

// DeleteAux buffers the deletion of key from bucket, like PutAux.
func (s *Store) DeleteAux(bucket byte, key []byte) {
	checkAuxBucket(bucket)
	s.w.batch.Delete(append([]byte{bucket}, key...))
}

// AscendAux calls fn for every committed key of bucket in ascending order
// (key without the bucket byte) until fn returns false. The slices are
// valid only during the call.
func (s *Store) AscendAux(bucket byte, fn func(key, value []byte) bool) error {
	checkAuxBucket(bucket)
	snap, err := s.acquire()
	if err != nil {
		return err
	}
	defer snap.release()
	var end []byte
	if bucket != 0xff {
		end = []byte{bucket + 1}
	}
	if err := snap.view.Ascend([]byte{bucket}, end, func(k, v []byte) bool { return fn(k[1:], v) }); err != nil {
		return fmt.Errorf("ascend bucket %q: %w", bucket, err)
	}
	return nil
}

// Commit writes every buffered change, the consistent index and any aux
// writes in one atomic backend batch and makes them visible to readers;
// while a compaction is in progress, the batch also carries its next
// step (compact.go), so Commit has work even with nothing buffered.
// It returns the events of the revisions it made visible, in revision
// order (the caller owns the slice; the watch hub takes them). An error
// is fatal: the store refuses further work.
func (s *Store) Commit() ([]mvccpb.Event, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	w := &s.w
	if w.txn != nil {
		return nil, errors.New("kvstore: Commit with a write transaction still open")
	}
	if w.cursor != nil {
		s.compactStep()
	}
	if w.batch.Len() == 0 && !w.appliedDirty {
		return nil, nil
	}
	if w.appliedDirty {
		var v [16]byte
		binary.BigEndian.PutUint64(v[:8], w.appliedIndex)
		binary.BigEndian.PutUint64(v[8:], w.appliedTerm)
		w.batch.Put(metaAppliedKey, v[:])
	}
	start := time.Now()
	err := w.batch.Commit()
	s.m.commitSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		w.failed = fmt.Errorf("kvstore: commit failed, store unusable: %w", err)
		return nil, w.failed
	}
	s.install(s.backend.ReadView())
	events := w.events
	w.batch = s.backend.NewBatch()
	w.events = nil
	w.appliedDirty = false
	clear(w.pending)
	return events, nil
}

// SnapshotView returns the image as of the last Commit, for raft
// snapshots. The caller must Release it; it stays valid (and unchanged)
// however many commits follow.
func (s *Store) SnapshotView() ReadView {
	snap, err := s.acquire()
	if err != nil {
		return failedView{err: err}
	}
	return &snapshotView{snap: snap}
}

// snapshotView is a ReadView backed by a referenced snapshot.
type snapshotView struct {
	snap     *snapshot
	released atomic.Bool
}

func (v *snapshotView) Get(key []byte) ([]byte, bool, error) { return v.snap.view.Get(key) }
func (v *snapshotView) Ascend(start, end []byte, fn func(key, value []byte) bool) error {
	return v.snap.view.Ascend(start, end, fn)
}
func (v *snapshotView) Descend(start, end []byte, fn func(key, value []byte) bool) error {
	return v.snap.view.Descend(start, end, fn)
}
func (v *snapshotView) WriteTo(w io.Writer) (int64, error) { return v.snap.view.WriteTo(w) }
func (v *snapshotView) Release() {
	if v.released.CompareAndSwap(false, true) {
		v.snap.release()
	}
}

// failedView is the ReadView of a store that can no longer give one.
type failedView struct{ err error }

func (v failedView) Get([]byte) ([]byte, bool, error) { return nil, false, v.err }
func (v failedView) Ascend(_, _ []byte, _ func(key, value []byte) bool) error {
	return v.err
}
func (v failedView) Descend(_, _ []byte, _ func(key, value []byte) bool) error {
	return v.err
}
func (v failedView) WriteTo(io.Writer) (int64, error) { return 0, v.err }
func (v failedView) Release()                         {}
