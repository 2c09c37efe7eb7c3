package memory

import (
	"fmt"
	"io"

	"github.com/google/btree"

	"github.com/metastore-io/metastore/internal/format/kvimage"
)

// snapshotFormat names this engine's snapshot images: every key with its
// value in ascending key order, in internal/format/kvimage's framing (the byte
// layout and a worked example are in that package's doc). Version 1 was
// an earlier framing of this engine's own; it is refused.
var snapshotFormat = kvimage.Format{Name: "memory backend snapshot", Magic: "MSMEMSNP", Version: 2}

// ErrCorruptSnapshot wraps every format error Restore reports.
var ErrCorruptSnapshot = kvimage.ErrCorrupt

func writeSnapshot(w io.Writer, tree *btree.BTreeG[item]) (int64, error) {
	enc := kvimage.NewEncoder(w, snapshotFormat)
	var err error
	tree.Ascend(func(it item) bool {
		err = enc.Record(it.key, it.value)
		return err == nil
	})
	if err == nil {
		err = enc.Finish()
	}
	if err != nil {
		return enc.Written(), fmt.Errorf("write memory snapshot: %w", err)
	}
	return enc.Written(), nil
}

// readSnapshot parses and verifies a whole snapshot into a new tree; the
// tree is returned only if the whole image was genuine.
func readSnapshot(r io.Reader) (*btree.BTreeG[item], int64, error) {
	tree := btree.NewG(treeDegree, lessItem)
	var size int64
	_, err := kvimage.Decode(r, snapshotFormat, func(key, value []byte) error {
		// One allocation per record: the decoder reuses its buffers.
		buf := make([]byte, len(key)+len(value))
		copy(buf, key)
		copy(buf[len(key):], value)
		tree.ReplaceOrInsert(item{key: buf[:len(key):len(key)], value: buf[len(key):]})
		size += int64(len(buf))
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return tree, size, nil
}
