package etcddb

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/lease"
)

// etcd 3.6's bucket names (server/storage/schema/bucket.go).
var (
	bucketKey            = []byte("key")
	bucketMeta           = []byte("meta")
	bucketLease          = []byte("lease")
	bucketAlarm          = []byte("alarm")
	bucketCluster        = []byte("cluster")
	bucketMembers        = []byte("members")
	bucketMembersRemoved = []byte("members_removed")
	bucketAuth           = []byte("auth")
	bucketAuthUsers      = []byte("authUsers")
	bucketAuthRoles      = []byte("authRoles")

	// allBuckets is every bucket etcd 3.6 creates; a written file has
	// them all, as a file etcd saved does.
	allBuckets = [][]byte{bucketKey, bucketMeta, bucketLease, bucketAlarm, bucketCluster,
		bucketMembers, bucketMembersRemoved, bucketAuth, bucketAuthUsers, bucketAuthRoles}
)

// Keys of etcd's meta, cluster and auth buckets.
var (
	metaConsistentIndex       = []byte("consistent_index")
	metaTerm                  = []byte("term")
	metaConfState             = []byte("confState")
	metaScheduledCompact      = []byte("scheduledCompactRev")
	metaFinishedCompact       = []byte("finishedCompactRev")
	metaStorageVersion        = []byte("storageVersion")
	clusterVersionKey         = []byte("clusterVersion")
	clusterDowngradeKey       = []byte("downgrade")
	authEnabledKey            = []byte("authEnabled")
	memberRemovedValue        = []byte("removed")
	etcdRevKeyLen             = 8 + 1 + 8
	etcdTombstoneMark    byte = 't'
)

// StorageVersion is the storage version a written file records (meta
// storageVersion) and its cluster version (cluster clusterVersion): the
// schema of etcd 3.6, which MetaStore's Maintenance.Status reports.
const (
	StorageVersion = "3.6.0"
	clusterVersion = "3.6.0"
)

// etcdDowngrade is etcd's record of a downgrade job (cluster downgrade),
// JSON as etcd's version.DowngradeInfo.
type etcdDowngrade struct {
	TargetVersion string `json:"target-version"`
	Enabled       bool   `json:"enabled"`
}

// ErrCorrupt is wrapped by every error about a file's content.
var ErrCorrupt = errors.New("not a valid etcd snapshot file")

// toEtcdRevKey rewrites a backend revision key ('r', 8-byte main, 8-byte
// sub, optional 't') as etcd's (8-byte main, '_', 8-byte sub, optional
// 't').
func toEtcdRevKey(dst, k []byte) ([]byte, error) {
	main, sub, tombstone, err := kvstore.ParseRevisionKey(k)
	if err != nil {
		return nil, err
	}
	dst = binary.BigEndian.AppendUint64(dst[:0], uint64(main))
	dst = append(dst, '_')
	dst = binary.BigEndian.AppendUint64(dst, uint64(sub))
	if tombstone {
		dst = append(dst, etcdTombstoneMark)
	}
	return dst, nil
}

// parseEtcdRevKey decodes a key of etcd's key bucket.
func parseEtcdRevKey(k []byte) (main, sub int64, tombstone bool, err error) {
	if len(k) != etcdRevKeyLen && len(k) != etcdRevKeyLen+1 {
		return 0, 0, false, fmt.Errorf("%w: revision key %x: %d bytes, want %d or %d", ErrCorrupt, k, len(k), etcdRevKeyLen, etcdRevKeyLen+1)
	}
	if k[8] != '_' {
		return 0, 0, false, fmt.Errorf("%w: revision key %x: separator %q, want '_'", ErrCorrupt, k, k[8])
	}
	if len(k) == etcdRevKeyLen+1 {
		if k[etcdRevKeyLen] != etcdTombstoneMark {
			return 0, 0, false, fmt.Errorf("%w: revision key %x: mark %q, want 't'", ErrCorrupt, k, k[etcdRevKeyLen])
		}
		tombstone = true
	}
	main = int64(binary.BigEndian.Uint64(k[:8]))
	sub = int64(binary.BigEndian.Uint64(k[9:17]))
	if main < 0 || sub < 0 {
		return 0, 0, false, fmt.Errorf("%w: revision key %x: negative revision", ErrCorrupt, k)
	}
	return main, sub, tombstone, nil
}

// metaRevValue is etcd's encoding of a compaction revision in its meta
// bucket: a revision key with sub 0.
func metaRevValue(rev int64) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, etcdRevKeyLen), uint64(rev))
	v = append(v, '_')
	return binary.BigEndian.AppendUint64(v, 0)
}

// parseMetaRev decodes scheduledCompactRev or finishedCompactRev.
func parseMetaRev(name string, v []byte) (int64, error) {
	main, _, tombstone, err := parseEtcdRevKey(v)
	if err != nil || tombstone {
		return 0, fmt.Errorf("%w: meta %s = %x is not a revision", ErrCorrupt, name, v)
	}
	return main, nil
}

// importedRecord is one record of the backend built from an etcd file.
type importedRecord struct {
	key, value []byte
	// main is the record's main revision (key bucket only).
	main int64
	// skip is set for a key bucket entry with an empty value: the marker
	// etcdutl's --bump-revision leaves at the bumped revision, which
	// holds no key.
	skip bool
}

// importKeyRecord converts one entry of etcd's key bucket: the value must
// decode as an mvccpb.KeyValue naming a key, whose mod revision is the
// entry's (etcd keeps them equal; a tombstone carries only the key).
func importKeyRecord(k, v []byte) (importedRecord, error) {
	main, sub, tombstone, err := parseEtcdRevKey(k)
	if err != nil {
		return importedRecord{}, err
	}
	if len(v) == 0 {
		return importedRecord{main: main, skip: true}, nil
	}
	var kv mvccpb.KeyValue
	if err := kv.Unmarshal(v); err != nil {
		return importedRecord{}, fmt.Errorf("%w: revision %d.%d: %w", ErrCorrupt, main, sub, err)
	}
	if len(kv.Key) == 0 {
		return importedRecord{}, fmt.Errorf("%w: revision %d.%d holds an empty key", ErrCorrupt, main, sub)
	}
	if !tombstone && (kv.ModRevision != main || kv.CreateRevision <= 0 || kv.CreateRevision > main || kv.Version <= 0) {
		return importedRecord{}, fmt.Errorf("%w: revision %d.%d of %q: create %d, mod %d, version %d do not fit it",
			ErrCorrupt, main, sub, kv.Key, kv.CreateRevision, kv.ModRevision, kv.Version)
	}
	return importedRecord{key: kvstore.RevisionKey(main, sub, tombstone), value: v, main: main}, nil
}

// importLeaseRecord converts one entry of etcd's lease bucket (the
// 8-byte big-endian ID -> leasepb.Lease, the layout of MetaStore's lease
// bucket too).
func importLeaseRecord(k, v []byte) (importedRecord, error) {
	if len(k) != 8 {
		return importedRecord{}, fmt.Errorf("%w: lease key %x is not 8 bytes", ErrCorrupt, k)
	}
	r, err := lease.DecodeRecord(v)
	if err != nil {
		return importedRecord{}, fmt.Errorf("%w: lease %x: %w", ErrCorrupt, k, err)
	}
	if r.ID == 0 || uint64(r.ID) != binary.BigEndian.Uint64(k) {
		return importedRecord{}, fmt.Errorf("%w: lease key %x holds lease %016x", ErrCorrupt, k, uint64(r.ID))
	}
	if r.TTL <= 0 {
		return importedRecord{}, fmt.Errorf("%w: lease %016x has TTL %d", ErrCorrupt, uint64(r.ID), r.TTL)
	}
	key := append([]byte{lease.Bucket}, k...)
	return importedRecord{key: key, value: v}, nil
}

// AlarmRecordKey is the key of an alarm in MetaStore's alarm bucket
// (kvstore.BucketAlarm, written by internal/server), without the bucket
// byte: the member ID and the alarm type, big endian.
func AlarmRecordKey(memberID uint64, alarm pb.AlarmType) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 12), memberID)
	return binary.BigEndian.AppendUint32(k, uint32(alarm))
}

// importAlarmRecord converts one entry of etcd's alarm bucket: the key is
// an encoded AlarmMember, the value empty.
func importAlarmRecord(k, v []byte) (importedRecord, error) {
	var m pb.AlarmMember
	if err := m.Unmarshal(k); err != nil {
		return importedRecord{}, fmt.Errorf("%w: alarm %x: %w", ErrCorrupt, k, err)
	}
	if len(v) != 0 || m.MemberID == 0 || m.Alarm == pb.AlarmType_NONE || pb.AlarmType_name[int32(m.Alarm)] == "" {
		return importedRecord{}, fmt.Errorf("%w: alarm %x=%x is not an active alarm of a member", ErrCorrupt, k, v)
	}
	value, err := m.Marshal()
	if err != nil {
		return importedRecord{}, fmt.Errorf("encode alarm: %w", err)
	}
	key := append([]byte{kvstore.BucketAlarm}, AlarmRecordKey(m.MemberID, m.Alarm)...)
	return importedRecord{key: key, value: value}, nil
}

// etcdMember is a member in etcd's members bucket: the JSON of etcd's
// membership.Member, whose field names and order these mirror.
type etcdMember struct {
	ID         uint64   `json:"id"`
	PeerURLs   []string `json:"peerURLs"`
	IsLearner  bool     `json:"isLearner,omitempty"`
	Name       string   `json:"name,omitempty"`
	ClientURLs []string `json:"clientURLs,omitempty"`
}

// memberKey is etcd's key of a member: its ID in hex (types.ID.String).
func memberKey(id uint64) []byte { return []byte(strconv.FormatUint(id, 16)) }

// exportMember encodes m as etcd stores it.
func exportMember(m *membershippb.Member) ([]byte, error) {
	em := etcdMember{ID: m.ID, PeerURLs: []string{}}
	if ra := m.RaftAttributes; ra != nil {
		if ra.PeerUrls != nil {
			em.PeerURLs = ra.PeerUrls
		}
		em.IsLearner = ra.IsLearner
	}
	if ma := m.MemberAttributes; ma != nil {
		em.Name, em.ClientURLs = ma.Name, ma.ClientUrls
	}
	b, err := json.Marshal(em)
	if err != nil {
		return nil, fmt.Errorf("encode member %x: %w", m.ID, err)
	}
	return b, nil
}
