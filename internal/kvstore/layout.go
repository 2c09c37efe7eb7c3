package kvstore

import (
	"errors"
	"fmt"
)

// The backend layout, for the code that converts a whole backend to and
// from another store's file (internal/format/etcddb writes and reads etcd's
// bbolt snapshots): everything else goes through the Store's methods.

// BucketRevision and BucketMeta are the store's own buckets (see the
// package doc); every backend key starts with a bucket byte.
const (
	BucketRevision = bucketRevision
	BucketMeta     = bucketMeta
)

// RevisionKey is the backend key of the record of revision {main, sub},
// with the tombstone mark for a deletion.
func RevisionKey(main, sub int64, tombstone bool) []byte {
	return appendRevKey(make([]byte, 0, revKeyLen+1), revision{main: main, sub: sub}, tombstone)
}

// ParseRevisionKey decodes a backend key of BucketRevision.
func ParseRevisionKey(k []byte) (main, sub int64, tombstone bool, err error) {
	rev, tombstone, err := parseRevKey(k)
	return rev.main, rev.sub, tombstone, err
}

// MetaRecord is what a BucketMeta key of the backend holds.
type MetaRecord struct {
	// AppliedIndex and AppliedTerm are the raft entry whose effects the
	// backend holds (the consistent index); zero if not recorded.
	AppliedIndex, AppliedTerm uint64
	// CompactRev is the compacted main revision, -1 if never compacted.
	CompactRev int64
	// FinishedCompactRev is the last compaction whose old records are
	// all deleted: below CompactRev while a compaction is in progress
	// (the image then still holds records CompactRev makes unreachable),
	// -1 if none finished.
	FinishedCompactRev int64
}

// ReadMeta reads the meta keys of a backend view.
func ReadMeta(view Reader) (MetaRecord, error) {
	var m MetaRecord
	var err error
	if m.AppliedIndex, m.AppliedTerm, err = readApplied(view); err != nil {
		return m, err
	}
	if m.CompactRev, m.FinishedCompactRev, err = readCompaction(view); err != nil {
		return m, err
	}
	return m, nil
}

// CompactRevRecord is the backend key and value recording rev as the
// compacted revision, for a loader that fills a backend before the store
// opens on it (Open then takes rev as both the compacted revision and a
// floor of the current one, as etcd does). Without a
// FinishedCompactRecord the compaction counts as finished.
func CompactRevRecord(rev int64) (key, value []byte) {
	return append([]byte(nil), metaCompactKey...), revValue(rev)
}

// FinishedCompactRecord is the backend key and value recording rev (-1:
// none) as the last finished compaction, below the CompactRevRecord's
// revision when the loaded records still include some that compaction
// makes unreachable: Open then deletes them in steps, as after a crash.
func FinishedCompactRecord(rev int64) (key, value []byte) {
	return append([]byte(nil), metaCompactFinishedKey...), revValue(rev)
}

var errBumpNotPositive = errors.New("kvstore: revision bump must be positive")

// BumpRevision raises the store revision by amount and marks the new
// revision compacted: what `etcdutl snapshot restore --bump-revision
// --mark-compacted` does to a restored member, so that clients that saw
// revisions of the old cluster never see one again and watchers resuming
// from them get ErrCompacted instead of silently missing events. The
// history up to the current revision is compacted first (each key keeps
// its latest value). Apply side; Commit makes it durable.
func (s *Store) BumpRevision(amount int64) error {
	if err := s.usable(); err != nil {
		return err
	}
	if amount <= 0 {
		return fmt.Errorf("%w: %d", errBumpNotPositive, amount)
	}
	w := &s.w
	if w.rev > w.compactRev {
		if _, err := s.Compact(w.rev); err != nil {
			return fmt.Errorf("kvstore: compact before the revision bump: %w", err)
		}
	}
	w.rev += amount
	// No record lies between the compaction just scheduled (or the last
	// one) and the new revision, so compacting at the new revision
	// deletes the same records: that is the compaction now scheduled.
	s.scheduleCompaction(w.rev)
	s.logger.Info("bumped revision and marked it compacted", "revision", w.rev, "bump", amount)
	return nil
}
