package etcddb

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
)

const (
	// boltMagic is what a bbolt database holds at byte 16 of its first
	// page (little endian).
	boltMagic       = 0xED0CDAED
	boltMagicOffset = 16
	// checksumBlock: etcd's tools take a file whose size is whole
	// 512-byte blocks plus 32 bytes to end with a sha256 digest (bbolt
	// files are whole pages).
	checksumBlock = 512
	// loadBatchBytes bounds the keys and values of one backend batch.
	loadBatchBytes = 16 << 20
	// lockTimeout bounds the wait for another process's lock on a db.
	lockTimeout = 2 * time.Second
)

// IsDB reports whether the first bytes of a file are a bbolt database's,
// as etcd's snapshot files are.
func IsDB(head []byte) bool {
	return len(head) >= boltMagicOffset+4 && binary.LittleEndian.Uint32(head[boltMagicOffset:]) == boltMagic
}

// IsDBFile reports whether the file at path starts like a bbolt database.
func IsDBFile(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("open snapshot: %w", err)
	}
	defer f.Close()
	head := make([]byte, boltMagicOffset+4)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	return IsDB(head[:n]), nil
}

// hasDigest is etcdutl's test for a file that ends with a sha256 digest.
func hasDigest(size int64) bool { return size%checksumBlock == DigestSize }

// VerifyDigest checks the sha256 digest that ends a snapshot file, as
// etcdutl snapshot restore does: a file without one (a db file copied
// from a data dir) is refused unless skipHashCheck, a file with one
// must match it unless skipHashCheck.
func VerifyDigest(path string, skipHashCheck bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open snapshot: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat snapshot %s: %w", path, err)
	}
	if !hasDigest(st.Size()) {
		if skipHashCheck {
			return nil
		}
		return fmt.Errorf("snapshot %s: snapshot missing hash but --skip-hash-check=false", path)
	}
	if skipHashCheck {
		return nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size()-DigestSize)); err != nil {
		return fmt.Errorf("read snapshot %s: %w", path, err)
	}
	stored := make([]byte, DigestSize)
	if _, err := f.ReadAt(stored, st.Size()-DigestSize); err != nil {
		return fmt.Errorf("read snapshot %s digest: %w", path, err)
	}
	if computed := h.Sum(nil); !bytes.Equal(stored, computed) {
		return fmt.Errorf("snapshot %s: %w: expected sha256 %x, got %x", path, ErrCorrupt, stored, computed)
	}
	return nil
}

// File is an etcd snapshot file open for reading.
type File struct {
	path string
	db   *bolt.DB
}

// Open opens the etcd snapshot (bbolt database) at path read-only. It
// does not check the digest (VerifyDigest does) nor walk the pages:
// readers meet damaged pages as errors (see view).
func Open(path string) (*File, error) {
	// A db in use by a running etcd is locked; the timeout turns the
	// wait into an error instead of a hang.
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("open etcd db %s: it is locked: is an etcd still running on it?", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open etcd snapshot %s: %w: %w", path, ErrCorrupt, err)
	}
	return &File{path: path, db: db}, nil
}

// view runs fn in a read transaction. bbolt trusts its pages and panics
// on damage (tx.Check too, in a goroutine of its own, where no caller
// can recover it); a file from elsewhere must never crash the process,
// so fn runs here, where a panic becomes an ErrCorrupt error, and the
// transaction is ended in any case so that Close does not wait for it.
func (f *File) view(fn func(tx *bolt.Tx) error) (err error) {
	tx, err := f.db.Begin(false)
	if err != nil {
		return fmt.Errorf("etcd snapshot %s: %w", f.path, err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("etcd snapshot %s: %w: damaged page: %v", f.path, ErrCorrupt, r)
		}
		if rerr := tx.Rollback(); rerr != nil && err == nil {
			err = fmt.Errorf("etcd snapshot %s: %w", f.path, rerr)
		}
	}()
	if err := fn(tx); err != nil {
		return fmt.Errorf("etcd snapshot %s: %w", f.path, err)
	}
	return nil
}

// Close closes the file.
func (f *File) Close() error {
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("close etcd snapshot %s: %w", f.path, err)
	}
	return nil
}

// Loaded is what LoadInto found in a file.
type Loaded struct {
	// Revision is the highest main revision of the key bucket.
	Revision int64
	// CompactRev is etcd's finished compaction (-1 if none): the backend
	// records it as its compacted revision.
	CompactRev int64
	// ScheduledCompactRev is a compaction etcd had scheduled but not
	// finished (0 if none): the store must run it once open, as etcd
	// does on start.
	ScheduledCompactRev int64
	// Keys, Leases and Alarms count the key bucket's records, the
	// leases and the active alarms.
	Keys, Leases, Alarms int64
}

// Progress is told, now and then, how many of total records are done.
type Progress func(done, total int64)

// LoadInto writes the file's keys (with their whole history), leases
// and compaction point into b, an empty MetaStore backend, in batches of
// about loadBatchBytes, and the active alarms. The member list (members,
// members_removed) is not carried over: a restore builds a new cluster,
// as etcdutl's does; the cluster version is, as etcdutl keeps the cluster
// bucket (the new cluster does not record it again). Users, roles and the auth switch and
// revision are carried over, as etcdutl keeps them. On error b holds part of the
// file and must be thrown away.
func (f *File) LoadInto(b kvstore.Backend, progress Progress, logger *slog.Logger) (Loaded, error) {
	var ld Loaded
	err := f.view(func(tx *bolt.Tx) error {
		var err error
		if ld.CompactRev, ld.ScheduledCompactRev, err = readCompaction(tx); err != nil {
			return err
		}
		total := int64(0)
		for _, name := range append([][]byte{bucketKey, bucketLease, bucketAlarm}, authBuckets...) {
			if bk := tx.Bucket(name); bk != nil {
				total += int64(bk.Stats().KeyN)
			}
		}
		l := &loader{b: b, batch: b.NewBatch(), progress: progress, total: total}
		if err := l.bucket(tx, bucketKey, func(k, v []byte) (importedRecord, error) {
			r, err := importKeyRecord(k, v)
			ld.Revision = max(ld.Revision, r.main)
			if err == nil && !r.skip {
				ld.Keys++
			}
			return r, err
		}); err != nil {
			return err
		}
		if err := l.bucket(tx, bucketLease, func(k, v []byte) (importedRecord, error) {
			ld.Leases++
			return importLeaseRecord(k, v)
		}); err != nil {
			return err
		}
		if err := l.bucket(tx, bucketAlarm, func(k, v []byte) (importedRecord, error) {
			ld.Alarms++
			return importAlarmRecord(k, v)
		}); err != nil {
			return err
		}
		for _, name := range authBuckets {
			if err := l.bucket(tx, name, importAuthRecord(name)); err != nil {
				return err
			}
		}
		if ld.Alarms > 0 {
			// As etcdutl's restore, which keeps the alarm bucket: a
			// NOSPACE alarm still holds writes until disarmed.
			logger.Warn("the snapshot holds active alarms and they are restored: disarm them with etcdctl alarm disarm once resolved",
				"alarms", ld.Alarms)
		}
		if ld.CompactRev > 0 {
			key, value := kvstore.CompactRevRecord(ld.CompactRev)
			l.batch.Put(key, value)
		}
		if cluster := tx.Bucket(bucketCluster); cluster != nil {
			if v := cluster.Get(clusterVersionKey); len(v) > 0 {
				key, value := membership.VersionRecord(string(v))
				l.batch.Put(key, value)
			}
			// A downgrade job in progress stays, as etcdutl's
			// restore keeps it.
			if v := cluster.Get(clusterDowngradeKey); len(v) > 0 {
				var job etcdDowngrade
				if err := json.Unmarshal(v, &job); err != nil {
					return fmt.Errorf("%w: cluster downgrade %q: %w", ErrCorrupt, v, err)
				}
				if job.Enabled {
					key, value := membership.DowngradeRecord(job.TargetVersion)
					l.batch.Put(key, value)
				}
			}
		}
		return l.flush()
	})
	return ld, err
}

// authBuckets are etcd's auth buckets, loaded into the auth bucket.
var authBuckets = [][]byte{bucketAuth, bucketAuthUsers, bucketAuthRoles}

// importAuthRecord converts one record of etcd's auth buckets; unknown
// keys of the "auth" bucket are skipped.
func importAuthRecord(bucket []byte) func(k, v []byte) (importedRecord, error) {
	return func(k, v []byte) (importedRecord, error) {
		key, value, ok, err := auth.FromEtcd(string(bucket), k, v)
		if err != nil {
			return importedRecord{}, fmt.Errorf("%w: %s/%q: %w", ErrCorrupt, bucket, k, err)
		}
		if !ok {
			return importedRecord{skip: true}, nil
		}
		return importedRecord{key: append([]byte{kvstore.BucketAuth}, key...), value: value}, nil
	}
}

// readCompaction reads etcd's finished and scheduled compaction.
func readCompaction(tx *bolt.Tx) (finished, scheduled int64, err error) {
	finished = -1
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, 0, fmt.Errorf("%w: no %s bucket", ErrCorrupt, bucketMeta)
	}
	if v := meta.Get(metaFinishedCompact); v != nil {
		if finished, err = parseMetaRev(string(metaFinishedCompact), v); err != nil {
			return 0, 0, err
		}
	}
	if v := meta.Get(metaScheduledCompact); v != nil {
		if scheduled, err = parseMetaRev(string(metaScheduledCompact), v); err != nil {
			return 0, 0, err
		}
	}
	if scheduled <= finished {
		scheduled = 0
	}
	return finished, scheduled, nil
}

// loader fills a backend in batches.
type loader struct {
	b        kvstore.Backend
	batch    kvstore.Batch
	pending  int
	progress Progress
	total    int64
	done     int64
}

const progressEvery = 10_000

func (l *loader) bucket(tx *bolt.Tx, name []byte, convert func(k, v []byte) (importedRecord, error)) error {
	bk := tx.Bucket(name)
	if bk == nil {
		if bytes.Equal(name, bucketKey) {
			return fmt.Errorf("%w: no %s bucket", ErrCorrupt, name)
		}
		return nil
	}
	c := bk.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v == nil && bk.Bucket(k) != nil {
			return fmt.Errorf("%w: bucket %s holds a nested bucket %x", ErrCorrupt, name, k)
		}
		r, err := convert(k, v)
		if err != nil {
			return err
		}
		if l.done++; l.progress != nil && l.done%progressEvery == 0 {
			l.progress(l.done, l.total)
		}
		if r.skip {
			continue
		}
		// bbolt's slices point into its mmap, valid while tx is open;
		// a batch may keep them until it commits, which is inside tx.
		l.batch.Put(r.key, r.value)
		if l.pending += len(r.key) + len(r.value); l.pending >= loadBatchBytes {
			if err := l.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *loader) flush() error {
	if err := l.batch.Commit(); err != nil {
		return fmt.Errorf("load snapshot into the storage engine: %w", err)
	}
	l.batch, l.pending = l.b.NewBatch(), 0
	if l.progress != nil {
		l.progress(l.done, l.total)
	}
	return nil
}
