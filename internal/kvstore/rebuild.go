package kvstore

import (
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Rebuilding the key index is what a restart on a persistent engine costs
// (a million keys: every stored revision is read once). rebuildIndexPipelined
// does rebuildIndex's work in two goroutines:
//
//	scanner (own goroutine)          caller
//	  backend scan, in key order       replays each record into the
//	  parse revision key               index, in order
//	  decode KeyValue header     -->   copies new keys into slabs
//	  batches of indexRecord
//
// so that reading and decompressing the engine's blocks overlaps with the
// B-tree work, and the index keeps one allocation per new key (its
// keyIndex, whose newest revision is inline) plus a share of a key slab
// instead of two.

// BulkReader is implemented by views that have a cheaper way to read a
// large part of their content once (internal/rocksdb reads past its block
// cache, so that a start-up scan neither evicts nor keeps in RAM blocks
// no reader asked for).
type BulkReader interface {
	// AscendOnce is Ascend for a single pass that will not be repeated
	// soon: same order, same interval semantics, same slice validity.
	AscendOnce(start, end []byte, fn func(key, value []byte) bool) error
}

// indexRecord is what the key index needs from one stored revision.
type indexRecord struct {
	rev       revision
	tombstone bool
	create    int64
	version   int64
	lease     int64
	key       []byte // into the batch's keys
}

// recordBatch carries records from the scanner to the caller; batches are
// recycled, so key bytes are only valid until the caller hands it back.
type recordBatch struct {
	recs []indexRecord
	keys []byte
}

const (
	// rebuildBatchRecords is how many records the scanner hands over at
	// once: enough to make the channel cost negligible, small enough to
	// stay in cache.
	rebuildBatchRecords = 2048
	// rebuildBatches bounds the batches in flight (and so the memory the
	// scanner can run ahead with).
	rebuildBatches = 4
	// keySlabSize is the chunk new keys are copied into.
	keySlabSize = 64 << 10
)

// keySlab hands out immutable copies of keys from shared chunks. A chunk
// lives as long as any key in it: keys stored together were written
// around the same revision, so they tend to be deleted (and compacted)
// together too.
type keySlab struct{ buf []byte }

func (s *keySlab) copy(key []byte) []byte {
	if len(key) > keySlabSize/8 {
		return append([]byte(nil), key...)
	}
	if len(key) > cap(s.buf)-len(s.buf) {
		s.buf = make([]byte, 0, keySlabSize)
	}
	start := len(s.buf)
	s.buf = append(s.buf, key...)
	return s.buf[start:len(s.buf):len(s.buf)]
}

// rebuildIndexPipelined replays every stored revision, in revision order,
// into x, like rebuildIndex (whose results it matches exactly), and
// returns the highest main revision seen.
func rebuildIndexPipelined(view Reader, x *indexWriter, s *Store) (int64, error) {
	full := make(chan *recordBatch, rebuildBatches)
	empty := make(chan *recordBatch, rebuildBatches)
	for range rebuildBatches {
		empty <- &recordBatch{
			recs: make([]indexRecord, 0, rebuildBatchRecords),
			keys: make([]byte, 0, rebuildBatchRecords*64),
		}
	}
	// The scanner always ends: this loop takes every batch it sends and
	// hands every one back.
	scanErr := make(chan error, 1)
	go func() {
		defer close(full)
		scanErr <- scanRecords(view, full, empty)
	}()

	var (
		lastRev int64
		slab    keySlab
	)
	for b := range full {
		for i := range b.recs {
			r := &b.recs[i]
			lastRev = r.rev.main
			ki := x.lookup(r.key)
			switch {
			case ki != nil && r.tombstone:
				if !ki.tombstone(r.rev) {
					s.logger.Warn("tombstone of a key that is not live", "key", string(r.key), "revision", r.rev.main)
				}
			case ki != nil:
				ki.put(r.rev, r.lease)
			default:
				x.insert(newRestoredKey(slab.copy(r.key), r))
			}
		}
		b.recs, b.keys = b.recs[:0], b.keys[:0]
		empty <- b
	}
	if err := <-scanErr; err != nil {
		return 0, fmt.Errorf("scan revisions: %w", err)
	}
	return lastRev, nil
}

// newRestoredKey starts the history of a key met for the first time, as
// keyIndex.restore (or restoreTombstone for a tombstone) would.
func newRestoredKey(key []byte, r *indexRecord) *keyIndex {
	ki := &keyIndex{key: key}
	if r.tombstone {
		ki.restoreTombstone(r.rev)
	} else {
		ki.restore(r.create, r.rev, r.version, r.lease)
	}
	return ki
}

// scanRecords reads the revision bucket into batches taken from empty and
// sent on full, until the bucket ends or a record is malformed.
func scanRecords(view Reader, full chan<- *recordBatch, empty <-chan *recordBatch) error {
	ascend := view.Ascend
	if br, ok := view.(BulkReader); ok {
		ascend = br.AscendOnce
	}
	var (
		b       = <-empty
		kv      mvccpb.KeyValue
		failure error
	)
	err := ascend([]byte{bucketRevision}, []byte{bucketRevision + 1}, func(k, v []byte) bool {
		rev, tombstone, err := parseRevKey(k)
		if err != nil {
			failure = err
			return false
		}
		if err := decodeKeyValue(v, &kv); err != nil {
			failure = fmt.Errorf("revision %d.%d: %w", rev.main, rev.sub, err)
			return false
		}
		start := len(b.keys)
		b.keys = append(b.keys, kv.Key...)
		b.recs = append(b.recs, indexRecord{
			rev: rev, tombstone: tombstone,
			create: kv.CreateRevision, version: kv.Version, lease: kv.Lease,
			key: b.keys[start:len(b.keys):len(b.keys)],
		})
		if len(b.recs) == rebuildBatchRecords {
			full <- b
			b = <-empty
		}
		return true
	})
	if err == nil {
		err = failure
	}
	if err != nil {
		return err
	}
	if len(b.recs) > 0 {
		full <- b
	}
	return nil
}
