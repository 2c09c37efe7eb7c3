package rocksdb

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"

	"github.com/linxGnu/grocksdb"

	"github.com/metastore-io/metastore/internal/faults/diskfault"
)

var errBatchDone = errors.New("rocksdb: batch already committed")

// batch is a RocksDB WriteBatch: RocksDB copies keys and values into it
// on every call, and applies it with one DB.Write, which is atomic (one
// WAL record, one memtable insertion under one sequence number range).
type batch struct {
	b   *Backend
	wb  *grocksdb.WriteBatch
	ops int
	// maxKey is the largest key this batch has put: an unbounded
	// DeleteRange must reach past it (see DeleteRange).
	maxKey []byte
	hasMax bool
	// err is a failure while collecting (DeleteRange may read the
	// database), reported by Commit, which then writes nothing.
	err     error
	cleanup runtime.Cleanup
}

func newBatch(b *Backend) *batch {
	wb := grocksdb.NewWriteBatch()
	bt := &batch{b: b, wb: wb}
	// A batch dropped without Commit (an apply that failed halfway) must
	// not leak its C buffer.
	bt.cleanup = runtime.AddCleanup(bt, func(wb *grocksdb.WriteBatch) { wb.Destroy() }, wb)
	return bt
}

func (bt *batch) usable() {
	if bt.wb == nil {
		panic("rocksdb: batch used after Commit")
	}
}

func (bt *batch) Put(key, value []byte) {
	bt.usable()
	bt.wb.Put(key, value)
	bt.ops++
	if !bt.hasMax || bytes.Compare(key, bt.maxKey) > 0 {
		bt.maxKey = append(bt.maxKey[:0], key...)
		bt.hasMax = true
	}
}

// PutOwned is Put: the write batch copies the value into RocksDB's
// buffer either way.
func (bt *batch) PutOwned(key, value []byte) { bt.Put(key, value) }

func (bt *batch) Delete(key []byte) {
	bt.usable()
	bt.wb.Delete(key)
	bt.ops++
}

// DeleteRange maps to RocksDB's range tombstone. A nil end means no upper
// bound (as for Ascend). RocksDB needs a finite end, so it becomes the
// successor of the largest key that could be in range when the batch is
// applied: the largest committed key or the largest key put by this batch
// so far, whichever is larger (k+"\x00" is the smallest key above k).
// Only the single writer changes the database, so the committed part
// cannot grow before Commit.
func (bt *batch) DeleteRange(start, end []byte) {
	bt.usable()
	bt.ops++
	if end == nil {
		last, ok, err := bt.lastCommittedKey()
		if err != nil {
			bt.err = err
			return
		}
		if bt.hasMax && (!ok || bytes.Compare(bt.maxKey, last) > 0) {
			last, ok = bt.maxKey, true
		}
		if !ok {
			return // nothing committed, nothing put: nothing to delete
		}
		end = append(bytes.Clone(last), 0)
	}
	if bytes.Compare(start, end) >= 0 {
		return // empty interval; RocksDB rejects an inverted one
	}
	bt.wb.DeleteRange(start, end)
}

// lastCommittedKey returns a copy of the largest key in the live
// database; ok is false if it is empty.
func (bt *batch) lastCommittedKey() (key []byte, ok bool, err error) {
	gen := bt.b.current.Load()
	opts := grocksdb.NewDefaultReadOptions()
	defer opts.Destroy()
	it := gen.db.NewIterator(opts)
	defer it.Close()
	it.SeekToLast()
	if !it.Valid() {
		if err := it.Err(); err != nil {
			return nil, false, fmt.Errorf("find end of unbounded delete range: %w", err)
		}
		return nil, false, nil
	}
	return append([]byte(nil), it.Key().Data()...), true, nil
}

func (bt *batch) Len() int { return bt.ops }

// Commit writes the batch with the WAL on and no fsync (doc.go explains
// why that is crash-safe), then frees it.
func (bt *batch) Commit() error {
	if bt.wb == nil {
		return errBatchDone
	}
	defer bt.free()
	if bt.b.closed.Load() {
		return ErrClosed
	}
	if bt.err != nil {
		return fmt.Errorf("rocksdb commit: %w", bt.err)
	}
	if bt.ops == 0 {
		return nil
	}
	gen := bt.b.current.Load()
	if err := diskfault.BeforeWrite(gen.path); err != nil {
		return fmt.Errorf("rocksdb commit of %d operations: %w", bt.ops, err)
	}
	err := gen.db.Write(gen.write, bt.wb)
	gen.sizes.bump() // a failed write may have written part of the batch
	if err != nil {
		return fmt.Errorf("rocksdb commit of %d operations: %w", bt.ops, err)
	}
	return nil
}

func (bt *batch) free() {
	bt.cleanup.Stop()
	bt.wb.Destroy()
	bt.wb = nil
}
