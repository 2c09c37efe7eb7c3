package kvstore

import (
	"encoding/binary"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Compact discards the history before rev: afterwards only the value each
// key had at rev (and everything newer) can be read. The key index is
// compacted now and the dropped revisions are deleted from the backend in
// the pending batch, together with the new compacted revision, so the
// next Commit makes both durable and visible at once. Readers keep using
// the previous image, which still holds the old revisions, until then.
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
	start := time.Now()
	var (
		keyBuf  [revKeyLen + 1]byte
		removed int
	)
	keys := w.index.compact(rev, func(r revision, tombstone bool) {
		w.batch.Delete(appendRevKey(keyBuf[:0], r, tombstone))
		delete(w.pending, r)
		removed++
	})
	// The index and the backend deletes are one pass here, with writes
	// paused (the apply goroutine runs it), so etcd's three durations are
	// the same figure.
	took := time.Since(start)
	s.m.observeCompaction(took, took, removed)
	w.compactRev = rev
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(rev))
	w.batch.Put(metaCompactKey, v[:])
	s.logger.Info("compacted",
		"compact-revision", rev, "keys-touched", keys, "revisions-removed", removed,
		"took", took)
	return &etcdserverpb.CompactionResponse{Header: &etcdserverpb.ResponseHeader{Revision: w.rev}}, nil
}
