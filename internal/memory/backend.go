package memory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// treeDegree is the B-tree degree. Items are stored by value (two slice
// headers), so a node copy on write costs about 2*degree*48 bytes.
const treeDegree = 16

// ErrClosed is returned by a closed Backend, ErrReleased by a released
// ReadView.
var (
	ErrClosed   = errors.New("memory backend: closed")
	ErrReleased = errors.New("memory backend: read view used after Release")
)

// item is one key/value pair. Both slices are owned by the tree and never
// modified once inserted.
type item struct {
	key, value []byte
}

func lessItem(a, b item) bool { return bytes.Compare(a.key, b.key) < 0 }

// image is an immutable committed state: readers share it without locks.
type image struct {
	tree *btree.BTreeG[item]
	size int64 // bytes of keys and values
}

// Backend is an in-RAM kvstore.Backend. The writer owns a mutable B-tree;
// after each Commit or Restore it publishes a copy-on-write clone of it as
// the current image, which ReadViews then use without locks.
type Backend struct {
	// Writer state: only the single writing goroutine touches these.
	tree *btree.BTreeG[item]
	size int64

	current atomic.Pointer[image]
	closed  atomic.Bool
}

var _ kvstore.Backend = (*Backend)(nil)

// New returns an empty Backend.
func New() *Backend {
	b := &Backend{tree: btree.NewG(treeDegree, lessItem)}
	b.publish()
	return b
}

// publish makes the writer's tree the current image. The clone is cheap:
// nodes are shared until the writer next changes them.
func (b *Backend) publish() {
	b.current.Store(&image{tree: b.tree.Clone(), size: b.size})
}

// NewBatch starts an empty write batch.
func (b *Backend) NewBatch() kvstore.Batch { return &batch{b: b} }

// ReadView returns the current image. Releasing it is cheap; an unreleased
// view only keeps memory alive.
func (b *Backend) ReadView() kvstore.ReadView {
	if b.closed.Load() {
		return &readView{err: ErrClosed}
	}
	return &readView{img: b.current.Load()}
}

// Size is the number of bytes of keys and values held.
func (b *Backend) Size() int64 { return b.current.Load().size }

// SizeInUse equals Size: memory freed by deletes is returned to the Go
// runtime, nothing stays allocated but unused.
func (b *Backend) SizeInUse() int64 { return b.current.Load().size }

// Close marks the backend closed; later batches and views fail.
func (b *Backend) Close() error {
	b.closed.Store(true)
	return nil
}

// Restore replaces the content with a snapshot written by WriteTo. The
// whole image is parsed and checked (format, order, count, checksum)
// before anything changes; on error the old content is kept.
func (b *Backend) Restore(r io.Reader) error {
	if b.closed.Load() {
		return ErrClosed
	}
	tree, size, err := readSnapshot(r)
	if err != nil {
		return fmt.Errorf("memory backend restore: %w", err)
	}
	b.tree, b.size = tree, size
	b.publish()
	return nil
}

// readView is a kvstore.ReadView over one image.
type readView struct {
	img      *image
	err      error // set for views of a closed backend
	released atomic.Bool
}

func (v *readView) check() error {
	if v.err != nil {
		return v.err
	}
	if v.released.Load() {
		return ErrReleased
	}
	return nil
}

func (v *readView) Get(key []byte) ([]byte, bool, error) {
	if err := v.check(); err != nil {
		return nil, false, err
	}
	it, ok := v.img.tree.Get(item{key: key})
	return it.value, ok, nil
}

func (v *readView) Ascend(start, end []byte, fn func(key, value []byte) bool) error {
	if err := v.check(); err != nil {
		return err
	}
	iter := func(it item) bool { return fn(it.key, it.value) }
	switch {
	case end == nil:
		v.img.tree.AscendGreaterOrEqual(item{key: start}, iter)
	case bytes.Compare(start, end) < 0:
		v.img.tree.AscendRange(item{key: start}, item{key: end}, iter)
	}
	return nil
}

func (v *readView) Descend(start, end []byte, fn func(key, value []byte) bool) error {
	if err := v.check(); err != nil {
		return err
	}
	// [start, end) walked from the top: start below end (or at the last
	// key when end is nil), stopping before going under start.
	iter := func(it item) bool {
		if bytes.Compare(it.key, start) < 0 {
			return false
		}
		return fn(it.key, it.value)
	}
	switch {
	case end == nil:
		v.img.tree.Descend(iter)
	case bytes.Compare(start, end) < 0:
		v.img.tree.DescendLessOrEqual(item{key: end}, func(it item) bool {
			if bytes.Equal(it.key, end) {
				return true // end itself is excluded
			}
			return iter(it)
		})
	}
	return nil
}

func (v *readView) WriteTo(w io.Writer) (int64, error) {
	if err := v.check(); err != nil {
		return 0, err
	}
	return writeSnapshot(w, v.img.tree)
}

func (v *readView) Release() { v.released.Store(true) }

// batch collects operations; Commit applies them in order.
type batch struct {
	b         *Backend
	ops       []op
	committed bool
}

type opKind uint8

const (
	opPut opKind = iota
	opDelete
	opDeleteRange
)

type op struct {
	kind     opKind
	key, arg []byte // arg: the value of a put, the end of a range delete
}

// copyPair copies key and value into one allocation.
func copyPair(key, value []byte) ([]byte, []byte) {
	buf := make([]byte, len(key)+len(value))
	copy(buf, key)
	copy(buf[len(key):], value)
	return buf[:len(key):len(key)], buf[len(key):]
}

func (bt *batch) Put(key, value []byte) {
	k, v := copyPair(key, value)
	bt.ops = append(bt.ops, op{kind: opPut, key: k, arg: v})
}

// PutOwned keeps value as the stored value (no copy): the caller never
// modifies it, and readers only read it.
func (bt *batch) PutOwned(key, value []byte) {
	bt.ops = append(bt.ops, op{kind: opPut, key: append([]byte(nil), key...), arg: value})
}

func (bt *batch) Delete(key []byte) {
	bt.ops = append(bt.ops, op{kind: opDelete, key: append([]byte(nil), key...)})
}

// DeleteRange deletes [start, end); a nil end means no upper bound.
func (bt *batch) DeleteRange(start, end []byte) {
	s, e := copyPair(start, end)
	if end == nil {
		e = nil
	}
	bt.ops = append(bt.ops, op{kind: opDeleteRange, key: s, arg: e})
}

func (bt *batch) Len() int { return len(bt.ops) }

// Commit applies the operations to the writer's tree in order and
// publishes the result. Nothing can fail halfway: readers see all of the
// batch or none of it.
func (bt *batch) Commit() error {
	if bt.committed {
		return errors.New("memory backend: batch committed twice")
	}
	bt.committed = true
	b := bt.b
	if b.closed.Load() {
		return ErrClosed
	}
	for _, o := range bt.ops {
		switch o.kind {
		case opPut:
			if old, ok := b.tree.ReplaceOrInsert(item{key: o.key, value: o.arg}); ok {
				b.size -= int64(len(old.key) + len(old.value))
			}
			b.size += int64(len(o.key) + len(o.arg))
		case opDelete:
			if old, ok := b.tree.Delete(item{key: o.key}); ok {
				b.size -= int64(len(old.key) + len(old.value))
			}
		case opDeleteRange:
			b.deleteRange(o.key, o.arg)
		}
	}
	bt.ops = nil
	b.publish()
	return nil
}

func (b *Backend) deleteRange(start, end []byte) {
	var doomed []item
	collect := func(it item) bool {
		doomed = append(doomed, it)
		return true
	}
	switch {
	case end == nil:
		b.tree.AscendGreaterOrEqual(item{key: start}, collect)
	case bytes.Compare(start, end) < 0:
		b.tree.AscendRange(item{key: start}, item{key: end}, collect)
	}
	for _, it := range doomed {
		b.tree.Delete(it)
		b.size -= int64(len(it.key) + len(it.value))
	}
}
