package kvstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Restore replaces the whole content with a snapshot image written by
// SnapshotView().WriteTo (a raft snapshot) and rebuilds the store from it.
// Changes buffered since the last Commit are discarded. If the backend
// rejects the image the store is unchanged; an error after that (an image
// the backend accepts but that is not a valid MVCC image) is fatal.
func (s *Store) Restore(r io.Reader) error {
	if err := s.usable(); err != nil {
		return err
	}
	if s.w.txn != nil {
		return errors.New("kvstore: Restore with a write transaction still open")
	}
	if err := s.backend.Restore(r); err != nil {
		return fmt.Errorf("restore backend: %w", err)
	}
	if err := s.load(); err != nil {
		s.w.failed = fmt.Errorf("kvstore: restored image unusable: %w", err)
		return s.w.failed
	}
	return nil
}

// load resets the writer from the backend content, rebuilds the key index
// and installs the result; then it attaches live leased keys.
func (s *Store) load() error {
	start := time.Now()
	view := s.backend.ReadView()
	w := writer{
		index:       newIndexWriter(),
		rev:         1, // etcd's empty store is at revision 1
		compactRev:  -1,
		finishedRev: -1,
		batch:       s.backend.NewBatch(),
		pending:     make(map[revision]*mvccpb.KeyValue),
	}
	var err error
	if w.appliedIndex, w.appliedTerm, err = readApplied(view); err != nil {
		view.Release()
		return err
	}
	if w.compactRev, w.finishedRev, err = readCompaction(view); err != nil {
		view.Release()
		return err
	}
	if w.finishedRev != w.compactRev {
		// A compaction was cut short (a crash, or an image taken while
		// it ran): the rebuilt index below holds every record it had
		// left, and the next Commits go on deleting them.
		w.cursor = &compactCursor{target: w.compactRev, started: time.Now()}
	}
	lastRev, err := rebuildIndexPipelined(view, w.index, s)
	if err != nil {
		view.Release()
		return err
	}
	w.rev = max(w.rev, lastRev, w.compactRev)
	s.w = w
	s.install(view)

	if s.leases != nil {
		s.w.index.tree.Ascend(func(ki *keyIndex) bool {
			if ki.lease != 0 { // only a live key has one
				s.leases.Attach(ki.lease, ki.key)
			}
			return true
		})
	}
	s.logger.Info("kvstore loaded",
		"revision", s.w.rev, "compact-revision", s.w.compactRev, "finished-compact-revision", s.w.finishedRev,
		"keys", s.w.index.tree.Len(), "consistent-index", s.w.appliedIndex,
		"took", time.Since(start))
	return nil
}

func readApplied(view Reader) (index, term uint64, err error) {
	v, ok, err := view.Get(metaAppliedKey)
	if err != nil {
		return 0, 0, fmt.Errorf("read consistent index: %w", err)
	}
	if !ok {
		return 0, 0, nil
	}
	if len(v) != 16 {
		return 0, 0, fmt.Errorf("consistent index: %d bytes, want 16", len(v))
	}
	return binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:]), nil
}

// readCompaction reads the compacted (scheduled) revision and the last
// finished one, both -1 if the store was never compacted.
func readCompaction(view Reader) (scheduled, finished int64, err error) {
	read := func(key []byte, what string, absent int64) (int64, error) {
		v, ok, err := view.Get(key)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", what, err)
		}
		if !ok {
			return absent, nil
		}
		if len(v) != 8 {
			return 0, fmt.Errorf("%s: %d bytes, want 8", what, len(v))
		}
		return int64(binary.BigEndian.Uint64(v)), nil
	}
	if scheduled, err = read(metaCompactKey, "compacted revision", -1); err != nil {
		return 0, 0, err
	}
	// Stores written before compaction went in steps have no finished
	// key: their compactions finished in the batch that scheduled them.
	if finished, err = read(metaCompactFinishedKey, "finished compaction revision", scheduled); err != nil {
		return 0, 0, err
	}
	if finished > scheduled {
		return 0, 0, fmt.Errorf("finished compaction revision %d above the compacted revision %d", finished, scheduled)
	}
	return scheduled, finished, nil
}

// rebuildIndex replays every stored revision, in revision order, into x
// (etcd's restore). It returns the highest main revision seen.
func rebuildIndex(view Reader, x *indexWriter, s *Store) (int64, error) {
	var (
		lastRev int64
		kv      mvccpb.KeyValue
		scanErr error
	)
	err := view.Ascend([]byte{bucketRevision}, []byte{bucketRevision + 1}, func(k, v []byte) bool {
		rev, tombstone, err := parseRevKey(k)
		if err != nil {
			scanErr = err
			return false
		}
		if err := decodeKeyValue(v, &kv); err != nil {
			scanErr = fmt.Errorf("revision %d.%d: %w", rev.main, rev.sub, err)
			return false
		}
		lastRev = rev.main
		ki := x.lookup(kv.Key)
		switch {
		case ki != nil && tombstone:
			if !ki.tombstone(rev) {
				s.logger.Warn("tombstone of a key that is not live", "key", string(kv.Key), "revision", rev.main)
			}
		case ki != nil:
			ki.put(rev, kv.Lease)
		case tombstone:
			ki = &keyIndex{key: append([]byte(nil), kv.Key...)}
			ki.restoreTombstone(rev)
			x.insert(ki)
		default:
			ki = &keyIndex{key: append([]byte(nil), kv.Key...)}
			ki.restore(kv.CreateRevision, rev, kv.Version, kv.Lease)
			x.insert(ki)
		}
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("scan revisions: %w", err)
	}
	if scanErr != nil {
		return 0, fmt.Errorf("scan revisions: %w", scanErr)
	}
	return lastRev, nil
}
