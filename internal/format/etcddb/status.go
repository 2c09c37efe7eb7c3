package etcddb

import (
	"bytes"
	"fmt"
	"hash/crc32"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Status is `etcdutl snapshot status` of an etcd snapshot file.
type Status struct {
	// Hash is the CRC-32C of every bucket name, key and value, in
	// bbolt's order.
	Hash uint32
	// Revision is the main revision of the key bucket's last record.
	Revision int64
	// TotalKey counts the keys live at Revision.
	TotalKey int64
	// TotalSize is the database's size (its pages, without the digest).
	TotalSize int64
	// Version is the storage version the file records ("" before 3.6).
	Version string
}

// ReadStatus computes the status of the etcd snapshot at path as etcdutl
// does, figure for figure. It checks the file's pages (Open) but not its
// digest, as etcdutl's status does not.
func ReadStatus(path string) (st Status, err error) {
	f, err := Open(path)
	if err != nil {
		return st, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	live := map[string]struct{}{}
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	err = f.view(func(tx *bolt.Tx) error {
		st.TotalSize = tx.Size()
		if meta := tx.Bucket(bucketMeta); meta != nil {
			st.Version = storageVersion(meta.Get(metaStorageVersion))
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			h.Write(name)
			isKey := bytes.Equal(name, bucketKey)
			return b.ForEach(func(k, v []byte) error {
				h.Write(k)
				h.Write(v)
				if !isKey {
					return nil
				}
				main, _, tombstone, err := parseEtcdRevKey(k)
				if err != nil {
					return err
				}
				st.Revision = main
				var kv mvccpb.KeyValue
				if err := kv.Unmarshal(v); err != nil {
					return fmt.Errorf("%w: revision %d: %w", ErrCorrupt, main, err)
				}
				if tombstone {
					delete(live, string(kv.Key))
				} else {
					live[string(kv.Key)] = struct{}{}
				}
				return nil
			})
		})
	})
	if err != nil {
		return Status{}, err
	}
	st.TotalKey = int64(len(live))
	st.Hash = h.Sum32()
	return st, nil
}

// storageVersion is etcd's reading of meta storageVersion: a semver
// printed back ("3.6.0"), or "" when absent or not a version.
func storageVersion(v []byte) string {
	var major, minor, patch int
	if n, err := fmt.Sscanf(string(v), "%d.%d.%d", &major, &minor, &patch); err != nil || n != 3 {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", major, minor, patch)
}
