package kvstore

import "io"

// Backend is the ordered byte store the MVCC layer sits on. It knows nothing
// about revisions, keys or leases: it stores opaque keys in byte order. Both
// storage engines (internal/memory and internal/rocksdb) implement it and
// pass the same conformance suite (internal/kvstore/backendtest).
//
// Concurrency contract:
//   - Exactly one goroutine writes (the apply loop): NewBatch / Commit /
//     Restore are never called concurrently with each other.
//   - Any number of goroutines read concurrently with that writer, through
//     ReadViews. A ReadView is a point-in-time image: batches committed after
//     it was taken are invisible to it.
//
// Durability contract: Commit makes a batch visible atomically (all of it or
// none of it, also across a crash for persistent engines) but need not fsync:
// the Raft WAL is the durable record, and the consistent index the MVCC layer
// stores in every batch says where replay resumes after a crash.
type Backend interface {
	// NewBatch starts an empty write batch.
	NewBatch() Batch
	// ReadView returns a consistent image of everything committed so far.
	// The caller must Release it.
	ReadView() ReadView
	// Restore atomically replaces the whole content with an image written
	// by ReadView.WriteTo. On error the previous content is kept.
	Restore(r io.Reader) error
	// Size is the number of bytes the engine holds (on disk or in RAM),
	// SizeInUse the part of it holding live data.
	Size() int64
	SizeInUse() int64
	// Close releases the engine. Outstanding ReadViews must be released first.
	Close() error
}

// Reader is ordered point and range access.
type Reader interface {
	// Get returns the value stored under key. The returned slice must not be
	// modified, and is valid only as long as the view it came from.
	Get(key []byte) (value []byte, ok bool, err error)
	// Ascend calls fn for every key in [start, end) in ascending byte order
	// until fn returns false. A nil end means no upper bound. The slices
	// passed to fn are valid only during that call.
	Ascend(start, end []byte, fn func(key, value []byte) bool) error
	// Descend is Ascend in descending order over the same interval.
	Descend(start, end []byte, fn func(key, value []byte) bool) error
}

// ReadView is a point-in-time image of a Backend.
type ReadView interface {
	Reader
	// WriteTo writes the whole image in the engine's snapshot format, which
	// Backend.Restore accepts. It may run in another goroutine while the
	// writer goes on committing batches.
	WriteTo(w io.Writer) (int64, error)
	// Release frees the image. The view must not be used afterwards.
	Release()
}

// Batch collects writes applied atomically by Commit. Keys and values are
// copied by the batch; callers may reuse their slices after a call returns,
// except a value given to PutOwned.
type Batch interface {
	Put(key, value []byte)
	// PutOwned is Put of a value the caller hands over: the engine may
	// keep value itself rather than a copy (the memory engine does), so
	// the caller must never modify it afterwards. key is copied as by
	// Put. The MVCC layer's revision records are built for the batch
	// alone; a copy of a 1.5 MiB value would be garbage at once.
	PutOwned(key, value []byte)
	Delete(key []byte)
	// DeleteRange deletes every key in [start, end). A nil end means no
	// upper bound; an end not above start deletes nothing.
	DeleteRange(start, end []byte)
	// Len is the number of operations collected.
	Len() int
	// Commit applies the batch. A batch is not usable after Commit.
	Commit() error
}
