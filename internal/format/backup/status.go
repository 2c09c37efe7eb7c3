package backup

import (
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
)

// Status is what `metastore snapshot status` reports, the figures of
// `etcdutl snapshot status`.
type Status struct {
	// Hash is the store's hash of the snapshot's content, the figure
	// Maintenance.Hash reports for a member holding exactly this state.
	Hash uint32
	// Revision is the store revision the snapshot was taken at.
	Revision int64
	// TotalKey counts the keys that exist at Revision (deleted ones not).
	TotalKey int64
	// TotalSize is the file's size without its digest.
	TotalSize int64
}

// ReadStatus verifies the snapshot file at path and reads its figures by
// loading it into an in-memory store, the same MVCC code the server runs:
// it needs memory for the whole content, and it also proves the content
// is a store a member could start from.
func ReadStatus(path string) (st Status, err error) {
	f, err := Open(path)
	if err != nil {
		return st, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	b := memory.New()
	defer func() { err = errors.Join(err, b.Close()) }()
	if _, err := f.LoadInto(b); err != nil {
		return st, err
	}
	kv, err := kvstore.Open(b, kvstore.Options{})
	if err != nil {
		return st, fmt.Errorf("snapshot %s: %w: its content is not a MetaStore store: %w", path, ErrCorrupt, err)
	}
	defer func() { err = errors.Join(err, kv.Close()) }()
	all := []byte{0} // from the smallest key to the end
	resp, err := kv.Range(&pb.RangeRequest{Key: all, RangeEnd: all, CountOnly: true})
	if err != nil {
		return st, fmt.Errorf("snapshot %s: count keys: %w", path, err)
	}
	hash, err := kv.Hash()
	if err != nil {
		return st, fmt.Errorf("snapshot %s: hash: %w", path, err)
	}
	return Status{Hash: hash, Revision: kv.Rev(), TotalKey: resp.Count, TotalSize: f.BodySize()}, nil
}
