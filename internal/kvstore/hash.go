package kvstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// HashKVResult is the answer to HashKV.
type HashKVResult struct {
	// Hash covers the MVCC history up to HashRevision.
	Hash uint32
	// Revision is the store revision when the hash was taken.
	Revision int64
	// CompactRevision is the compacted revision then (-1: none).
	CompactRevision int64
	// HashRevision is the revision the hash is of.
	HashRevision int64
}

// HashKV is etcd's HashByRev over the last committed image: a CRC-32C of
// every stored revision up to rev (0: the current revision) that a
// compaction at rev would keep, in etcd's key encoding, so it equals
// etcd's value for the same history. Members that applied the same log
// agree on it whatever their storage engine.
//
// Unlike etcd, no hash computed during a compaction is cached, so for rev
// equal to a past compaction revision the value is the fresh one.
//
// While a compaction is in progress the records it has still to delete
// are left out (garbage below), so the value does not depend on how far
// it got, which differs between members (compact.go).
func (s *Store) HashKV(rev int64) (HashKVResult, error) {
	defer func(start time.Time) { s.m.hashRevSeconds.Observe(time.Since(start).Seconds()) }(time.Now())
	snap, err := s.acquire()
	if err != nil {
		return HashKVResult{}, err
	}
	defer snap.release()
	compactRev, currentRev := snap.compactRev, snap.rev
	switch {
	case rev > 0 && rev < compactRev:
		return HashKVResult{}, ErrCompacted
	case rev > 0 && rev > currentRev:
		return HashKVResult{}, ErrFutureRev
	case rev == 0:
		rev = currentRev
	}
	keep := snap.keys.keep(rev)
	garbage := snap.garbage()

	h := crc32.New(castagnoli)
	h.Write([]byte("key")) // etcd's bucket name
	var (
		etcdKey []byte
		scanErr error
	)
	err = snap.view.Ascend([]byte{bucketRevision}, revKeyStart(rev+1), func(k, v []byte) bool {
		kr, tombstone, err := parseRevKey(k)
		if err != nil {
			scanErr = err
			return false
		}
		if garbage(kr) {
			return true
		}
		// Revisions a compaction at rev removes are skipped, unless the
		// store has none to keep (etcd's rule).
		if kr.main <= compactRev && len(keep) > 0 {
			if _, ok := keep[kr]; !ok {
				return true
			}
		}
		// A tombstone at the compacted revision is kept by etcd >= 3.5.16
		// but deleted by older versions; leave it out so both agree.
		if kr.main == compactRev && tombstone {
			return true
		}
		etcdKey = etcdRevKey(etcdKey, k)
		h.Write(etcdKey)
		h.Write(v)
		return true
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return HashKVResult{}, fmt.Errorf("hash revisions up to %d: %w", rev, err)
	}
	return HashKVResult{Hash: h.Sum32(), Revision: currentRev, CompactRevision: compactRev, HashRevision: rev}, nil
}

// garbage reports whether the record of a revision is one that the
// compaction in progress in this image has still to delete (never, when
// none is in progress).
func (snap *snapshot) garbage() func(revision) bool {
	if !snap.compacting() {
		return func(revision) bool { return false }
	}
	kept := snap.keys.survivors(snap.compactRev)
	return func(r revision) bool {
		if r.main > snap.compactRev {
			return false
		}
		_, ok := kept[r]
		return !ok
	}
}

// Hash is a CRC-32C of the whole committed backend image, every bucket
// included, except the consistent index and the finished compaction
// revision (which members legitimately differ on: they finish a
// compaction's physical half at different times), and except the
// records a compaction in progress has still to delete. It backs
// Maintenance.Hash, meant for tests.
func (s *Store) Hash() (uint32, error) {
	defer func(start time.Time) { s.m.hashSeconds.Observe(time.Since(start).Seconds()) }(time.Now())
	snap, err := s.acquire()
	if err != nil {
		return 0, err
	}
	defer snap.release()
	h := crc32.New(castagnoli)
	var (
		lens    []byte
		garbage = snap.garbage()
	)
	err = snap.view.Ascend(nil, nil, func(k, v []byte) bool {
		if bytes.Equal(k, metaAppliedKey) || bytes.Equal(k, metaCompactFinishedKey) {
			return true
		}
		if len(k) > 0 && k[0] == bucketRevision {
			if r, _, err := parseRevKey(k); err == nil && garbage(r) {
				return true
			}
		}
		// Lengths first, so that different splits of the same bytes into
		// key and value hash differently.
		lens = binary.AppendUvarint(lens[:0], uint64(len(k)))
		lens = binary.AppendUvarint(lens, uint64(len(v)))
		h.Write(lens)
		h.Write(k)
		h.Write(v)
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("hash backend: %w", err)
	}
	return h.Sum32(), nil
}
