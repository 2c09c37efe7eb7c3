package etcddb

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/lease"
)

const (
	// DigestSize is the length of the sha256 digest that follows the
	// database in a snapshot file.
	DigestSize = sha256.Size
	// recordsPerTx bounds the puts of one bbolt write transaction, whose
	// dirty pages bbolt keeps in memory until it commits: the file is
	// built in pieces of this many records, never the whole store.
	recordsPerTx = 50_000
	// fileMode is the mode of a built file; it holds every key.
	fileMode = 0o600
	// initialMmapSize is etcd's default --initial-memory-map-size.
	initialMmapSize = 10 << 30
)

// DB is a bbolt database in etcd 3.6's schema built from a MetaStore
// backend, held open read-only for sending. Size and WriteTo are what
// etcd's Maintenance.Snapshot sends: the database's pages (as of one read
// transaction, bbolt's Tx.WriteTo) and the sha256 of them.
type DB struct {
	path string
	db   *bolt.DB
	tx   *bolt.Tx
}

// Build writes src, a consistent view of a MetaStore backend (a
// kvstore ReadView), as an etcd database at path, which must not exist,
// and opens it for sending; Close removes the file. The file lives on
// disk, not in memory: a store of any size is converted in transactions
// of recordsPerTx records. ctx ends the build early.
func Build(ctx context.Context, path string, src kvstore.Reader) (*DB, error) {
	if err := write(ctx, path, src); err != nil {
		return nil, errors.Join(err, removeFile(path))
	}
	db, err := bolt.Open(path, fileMode, &bolt.Options{ReadOnly: true})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reopen %s: %w", path, err), removeFile(path))
	}
	tx, err := db.Begin(false)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("read %s: %w", path, err), db.Close(), removeFile(path))
	}
	return &DB{path: path, db: db, tx: tx}, nil
}

// Size is the number of bytes WriteTo writes: the database and its digest.
func (d *DB) Size() int64 { return d.tx.Size() + DigestSize }

// WriteTo writes the database followed by its sha256 digest.
func (d *DB) WriteTo(w io.Writer) (int64, error) {
	h := sha256.New()
	n, err := d.tx.WriteTo(io.MultiWriter(w, h))
	if err != nil {
		return n, fmt.Errorf("write etcd snapshot: %w", err)
	}
	m, err := w.Write(h.Sum(nil))
	if err != nil {
		return n + int64(m), fmt.Errorf("write etcd snapshot digest: %w", err)
	}
	return n + int64(m), nil
}

// Close ends the read transaction, closes the database and removes its
// file.
func (d *DB) Close() error {
	return errors.Join(d.tx.Rollback(), d.db.Close(), removeFile(d.path))
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// write builds the database file at path.
func write(ctx context.Context, path string, src kvstore.Reader) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("etcd snapshot: %s already exists", path)
	}
	// NoSync: the file is a transient copy; a crash leaves it to be
	// removed, never read. NoFreelistSync stays off so that a read-only
	// open (etcdutl snapshot status) finds the freelist.
	// A large initial memory map, as etcd's backend uses (10 GiB of
	// address space, not memory): bbolt otherwise remaps as the file
	// grows, copying every node of the open transaction out of the old
	// map each time, which was a third of the build's CPU.
	db, err := bolt.Open(path, fileMode, &bolt.Options{NoSync: true, NoGrowSync: true, InitialMmapSize: initialMmapSize})
	if err != nil {
		return fmt.Errorf("etcd snapshot: create %s: %w", path, err)
	}
	w := &writer{ctx: ctx, db: db}
	if err := errors.Join(w.run(src), db.Close()); err != nil {
		return fmt.Errorf("etcd snapshot: write %s: %w", path, err)
	}
	return nil
}

// writer puts the records of a backend view into a bbolt database in
// transactions of recordsPerTx records.
type writer struct {
	ctx context.Context
	db  *bolt.DB
	tx  *bolt.Tx
	n   int // puts in tx
	err error

	meta    kvstore.MetaRecord
	voters  []uint64
	learner []uint64
	revKey  []byte
	// clusterVersion and downgradeTarget are the member list's cluster
	// records ("" when absent): finishMeta writes them as etcd's.
	clusterVersion, downgradeTarget string
}

func (w *writer) run(src kvstore.Reader) error {
	var err error
	if w.meta, err = kvstore.ReadMeta(src); err != nil {
		return err
	}
	if w.tx, err = w.db.Begin(true); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for _, name := range allBuckets {
		b, err := w.tx.CreateBucketIfNotExists(name)
		if err != nil {
			return errors.Join(fmt.Errorf("create bucket %s: %w", name, err), w.tx.Rollback())
		}
		b.FillPercent = 1 // keys arrive in order: pack the pages full
	}
	ascendErr := src.Ascend(nil, nil, func(k, v []byte) bool {
		w.err = w.record(k, v)
		return w.err == nil
	})
	if err := errors.Join(ascendErr, w.err); err != nil {
		return errors.Join(err, w.tx.Rollback())
	}
	if err := w.finishMeta(); err != nil {
		return errors.Join(err, w.tx.Rollback())
	}
	if err := w.tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// record converts one backend record.
func (w *writer) record(k, v []byte) error {
	if len(k) == 0 {
		return fmt.Errorf("empty backend key")
	}
	switch k[0] {
	case kvstore.BucketRevision:
		var err error
		if w.revKey, err = toEtcdRevKey(w.revKey, k); err != nil {
			return err
		}
		return w.put(bucketKey, w.revKey, v)
	case kvstore.BucketMeta:
		return nil // read up front by ReadMeta; etcd's meta is written at the end
	case lease.Bucket:
		return w.put(bucketLease, k[1:], v)
	case membership.Bucket:
		return w.member(k[1:], v)
	case kvstore.BucketAlarm:
		// etcd keys an alarm by the AlarmMember's encoding, with no value;
		// MetaStore's value is that encoding.
		return w.put(bucketAlarm, v, []byte{})
	case kvstore.BucketConfChangeVeto:
		// Raft-log bookkeeping of the member that wrote it; etcd has
		// nothing like it and a restored member starts a new log.
		return nil
	case kvstore.BucketAuth:
		// Users, roles, the auth switch and revision go to etcd's auth,
		// authUsers and authRoles buckets, values unchanged.
		bucket, key, value, err := auth.ToEtcd(k[1:], v)
		if err != nil {
			return err
		}
		return w.put([]byte(bucket), key, value)
	}
	return fmt.Errorf("backend key %x: unknown bucket %q", k, k[0])
}

func (w *writer) member(k, v []byte) error {
	switch {
	case membership.IsVersionRecord(k):
		w.clusterVersion = string(v) // finishMeta writes etcd's
		return nil
	case membership.IsDowngradeRecord(k):
		w.downgradeTarget = string(v)
		return nil
	}
	m, removedID, err := membership.DecodeRecord(k, v)
	if err != nil {
		return err
	}
	if m == nil {
		return w.put(bucketMembersRemoved, memberKey(removedID), memberRemovedValue)
	}
	if m.RaftAttributes != nil && m.RaftAttributes.IsLearner {
		w.learner = append(w.learner, m.ID)
	} else {
		w.voters = append(w.voters, m.ID)
	}
	data, err := exportMember(m)
	if err != nil {
		return err
	}
	return w.put(bucketMembers, memberKey(m.ID), data)
}

// finishMeta writes etcd's meta and cluster keys.
func (w *writer) finishMeta() error {
	u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	slices.Sort(w.voters)
	slices.Sort(w.learner)
	confState, err := json.Marshal(raftpb.ConfState{Voters: w.voters, Learners: w.learner})
	if err != nil {
		return fmt.Errorf("encode conf state: %w", err)
	}
	puts := []struct{ bucket, key, value []byte }{
		{bucketMeta, metaConsistentIndex, u64(w.meta.AppliedIndex)},
		{bucketMeta, metaTerm, u64(w.meta.AppliedTerm)},
		{bucketMeta, metaConfState, confState},
		{bucketCluster, clusterVersionKey, []byte(cmp.Or(w.clusterVersion, clusterVersion))},
	}
	// A cluster downgraded to 3.5 gets etcd 3.5's schema, which has no
	// storage version (etcd 3.6 removes the key as it migrates down),
	// and the downgrade job as etcd records it, so that etcd 3.5
	// members restored from the file finish the downgrade.
	if !membership.PredatesStorageVersion(w.clusterVersion) {
		puts = append(puts, struct{ bucket, key, value []byte }{bucketMeta, metaStorageVersion, []byte(StorageVersion)})
	}
	if w.downgradeTarget != "" {
		job, err := json.Marshal(etcdDowngrade{TargetVersion: w.downgradeTarget, Enabled: true})
		if err != nil {
			return fmt.Errorf("encode downgrade job: %w", err)
		}
		puts = append(puts, struct{ bucket, key, value []byte }{bucketCluster, clusterDowngradeKey, job})
	}
	// etcd records a finished compaction as both keys equal. A
	// compaction MetaStore had not finished deleting the old records of
	// when the image was taken (they are in the file) is written as
	// etcd's unfinished one, which etcd runs again when it starts.
	if w.meta.CompactRev > 0 {
		puts = append(puts, struct{ bucket, key, value []byte }{bucketMeta, metaScheduledCompact, metaRevValue(w.meta.CompactRev)})
	}
	if w.meta.FinishedCompactRev > 0 {
		puts = append(puts, struct{ bucket, key, value []byte }{bucketMeta, metaFinishedCompact, metaRevValue(w.meta.FinishedCompactRev)})
	}
	for _, p := range puts {
		if err := w.put(p.bucket, p.key, p.value); err != nil {
			return err
		}
	}
	return nil
}

// put writes one record, committing the transaction every recordsPerTx
// records. bbolt keeps the slices until the commit, and the source's are
// valid only during its callback, so they are copied.
func (w *writer) put(bucket, k, v []byte) error {
	buf := make([]byte, len(k)+len(v))
	copy(buf, k)
	copy(buf[len(k):], v)
	if err := w.tx.Bucket(bucket).Put(buf[:len(k):len(k)], buf[len(k):]); err != nil {
		return fmt.Errorf("put %s/%x: %w", bucket, k, err)
	}
	if w.n++; w.n < recordsPerTx {
		return nil
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if err := w.tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	tx, err := w.db.Begin(true)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for _, name := range allBuckets {
		tx.Bucket(name).FillPercent = 1
	}
	w.tx, w.n = tx, 0
	return nil
}
