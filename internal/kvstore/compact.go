package kvstore

import (
	"encoding/binary"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// DefaultCompactionStep is the number of revisions a compaction removes
// per Commit when Options.CompactionStep is 0 (etcd's default
// --compaction-batch-limit).
const DefaultCompactionStep = 1000

// A compaction has two halves (see docs/performance.md, "Compaction
// without a write stall"):
//
//   - logical, at once: Compact records the new compacted revision (the
//     scheduled one, `m compact`), so from the next Commit on every read
//     below it fails with ErrCompacted;
//   - physical, in steps: every Commit first compacts the key index from
//     a cursor on, whole keys at a time, until about Options.CompactionStep
//     revisions are dropped, and deletes their records in the same batch.
//     The step that reaches the end of the key space records the
//     revision as finished (`m compactFinished`).
//
// Nothing observable depends on how far the physical half got: reads at
// or above the compacted revision find the same entries in a compacted
// and an uncompacted key history (TestKeyIndexCompactionProgressInvisible),
// and HashKV and Hash leave out the records the finished compaction will
// have deleted (survivors). Members, whose Commits fall at different
// places, therefore agree on every answer while compacting.
//
// A compaction at c2 while one at c1 < c2 runs restarts the cursor at
// the first key with target c2: compacting at c2 drops a superset of what
// c1 drops, from compacted and uncompacted histories alike. After a
// crash, Open finds scheduled != finished, and the rebuilt key index (it
// replays every stored record, garbage included) is compacted by the same
// steps from the first key.

// compactCursor is the physical half of a compaction in progress.
type compactCursor struct {
	target int64  // the revision being compacted at
	next   []byte // the first key not yet compacted; nil: the first key
	// started is when the compaction was scheduled, indexTook the time
	// the steps spent on the key index and removed the records deleted
	// so far, for the metrics of the finished compaction.
	started   time.Time
	indexTook time.Duration
	removed   int
}

// Compact discards the history before rev: afterwards only the value each
// key had at rev (and everything newer) can be read. The new compacted
// revision is stored in the pending batch and holds from the next Commit
// on; the old revisions are deleted by that Commit and the following ones,
// a bounded number each (see above).
//
// Compacting at or below the compacted revision fails with ErrCompacted,
// beyond the current revision with ErrFutureRev.
func (s *Store) Compact(rev int64) (*etcdserverpb.CompactionResponse, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	w := &s.w
	if w.txn != nil {
		return nil, errors.New("kvstore: Compact with a write transaction still open")
	}
	if rev <= w.compactRev {
		return nil, ErrCompacted
	}
	if rev > w.rev {
		return nil, ErrFutureRev
	}
	if w.cursor != nil {
		s.logger.Info("compaction replaces the one in progress",
			"compact-revision", rev, "replaced-revision", w.cursor.target)
	}
	s.scheduleCompaction(rev)
	return &etcdserverpb.CompactionResponse{Header: &etcdserverpb.ResponseHeader{Revision: w.rev}}, nil
}

// scheduleCompaction makes rev the compacted revision, in the pending
// batch, and starts its physical half from the first key.
func (s *Store) scheduleCompaction(rev int64) {
	w := &s.w
	w.compactRev = rev
	w.cursor = &compactCursor{target: rev, started: time.Now()}
	w.batch.Put(metaCompactKey, revValue(rev))
	// Written with every schedule, so that the batch that first makes a
	// compaction pending says which revision was finished before it.
	w.batch.Put(metaCompactFinishedKey, revValue(w.finishedRev))
}

// Compacting reports whether a compaction still has records to delete,
// that is whether Commit has work to do even with nothing else to write.
// Apply side.
func (s *Store) Compacting() bool { return s.w.cursor != nil }

// compactStep runs one step of the compaction in progress into the
// pending batch: see the comment at the top of this file.
func (s *Store) compactStep() {
	w := &s.w
	c := w.cursor
	start := time.Now()
	var (
		keyBuf  [revKeyLen + 1]byte
		removed int
	)
	_, next := w.index.compactFrom(c.target, c.next, s.compactionStep, func(r revision, tombstone bool) {
		w.batch.Delete(appendRevKey(keyBuf[:0], r, tombstone))
		delete(w.pending, r)
		removed++
	})
	took := time.Since(start)
	// The step runs on the apply goroutine with writes paused.
	s.m.observeCompactionStep(took, removed)
	c.indexTook += took
	c.removed += removed
	c.next = next
	if next != nil {
		return
	}
	w.finishedRev = c.target
	w.cursor = nil
	w.batch.Put(metaCompactFinishedKey, revValue(c.target))
	s.m.observeCompactionFinished(c.indexTook, time.Since(c.started))
	// etcd's words (mvcc's scheduleCompaction): tools and etcd's own
	// tests wait for this line.
	s.logger.Info("finished scheduled compaction",
		"compact-revision", c.target, "revisions-removed", c.removed,
		"took", time.Since(c.started), "paused", c.indexTook)
}

// revValue is the backend encoding of a compaction revision: 8 bytes,
// big-endian, two's complement (-1: none).
func revValue(rev int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(rev))
}
