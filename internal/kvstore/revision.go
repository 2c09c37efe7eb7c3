package kvstore

import (
	"encoding/binary"
	"fmt"
)

// revision identifies one change: main is the store revision of the
// transaction that made it, sub the position of the change inside that
// transaction (0, 1, 2, ... in the order the changes were made).
type revision struct {
	main int64
	sub  int64
}

func (a revision) greaterThan(b revision) bool {
	if a.main != b.main {
		return a.main > b.main
	}
	return a.sub > b.sub
}

// Backend buckets. Every backend key starts with one bucket byte. The MVCC
// layer owns bucketRevision and bucketMeta; the others are handed out to
// other subsystems through the aux API (PutAux, DeleteAux, AscendAux).
const (
	bucketRevision byte = 'r'
	bucketMeta     byte = 'm'

	// BucketLease holds the lease table (written by the lease package).
	BucketLease byte = 'l'
	// BucketMembership holds cluster membership.
	BucketMembership byte = 'c'
	// BucketAuth holds users, roles and the auth revision.
	BucketAuth byte = 'a'
	// BucketConfChangeVeto records the membership changes the member
	// list refused, by raft index (written by the server package).
	BucketConfChangeVeto byte = 'v'
	// BucketAlarm holds the active alarms (NOSPACE, CORRUPT), written by
	// the server package in the batch of the entry that raised or
	// cleared them, so they survive restarts and travel in snapshots.
	BucketAlarm byte = 'A'
)

const (
	// revKeyLen is the length of a revision key without tombstone mark:
	// bucket byte, 8-byte big-endian main, 8-byte big-endian sub.
	revKeyLen = 1 + 8 + 8
	// tombstoneMark is appended to the revision key of a deletion.
	tombstoneMark byte = 't'
)

// Meta keys, inside bucketMeta.
var (
	// metaAppliedKey -> 8-byte BE raft index + 8-byte BE raft term of the
	// last entry whose effects are in the same batch.
	metaAppliedKey = []byte{bucketMeta, 'a', 'p', 'p', 'l', 'i', 'e', 'd'}
	// metaCompactKey -> 8-byte BE compacted main revision (the
	// scheduled compaction: reads below it fail).
	metaCompactKey = []byte{bucketMeta, 'c', 'o', 'm', 'p', 'a', 'c', 't'}
	// metaCompactFinishedKey -> 8-byte BE main revision of the last
	// compaction whose records are all deleted (-1: none); absent in
	// stores written before compaction went in steps, where it equals
	// the compacted revision.
	metaCompactFinishedKey = append([]byte{bucketMeta}, "compactFinished"...)
)

// appendRevKey appends the backend key of rev to dst.
func appendRevKey(dst []byte, rev revision, tombstone bool) []byte {
	dst = append(dst, bucketRevision)
	dst = binary.BigEndian.AppendUint64(dst, uint64(rev.main))
	dst = binary.BigEndian.AppendUint64(dst, uint64(rev.sub))
	if tombstone {
		dst = append(dst, tombstoneMark)
	}
	return dst
}

// revKeyStart is the smallest revision key with the given main revision.
func revKeyStart(main int64) []byte {
	return appendRevKey(make([]byte, 0, revKeyLen), revision{main: main}, false)
}

// parseRevKey decodes a backend key written by appendRevKey.
func parseRevKey(k []byte) (revision, bool, error) {
	if len(k) != revKeyLen && len(k) != revKeyLen+1 {
		return revision{}, false, fmt.Errorf("revision key %x: bad length %d", k, len(k))
	}
	if k[0] != bucketRevision {
		return revision{}, false, fmt.Errorf("revision key %x: bad bucket %q", k, k[0])
	}
	tombstone := len(k) == revKeyLen+1
	if tombstone && k[revKeyLen] != tombstoneMark {
		return revision{}, false, fmt.Errorf("revision key %x: bad mark %q", k, k[revKeyLen])
	}
	rev := revision{
		main: int64(binary.BigEndian.Uint64(k[1:9])),
		sub:  int64(binary.BigEndian.Uint64(k[9:17])),
	}
	if rev.main < 0 || rev.sub < 0 {
		return revision{}, false, fmt.Errorf("revision key %x: negative revision", k)
	}
	return rev, tombstone, nil
}

// etcdRevKey rewrites one of our revision keys into the byte layout etcd
// uses in its "key" bucket (8-byte main, '_', 8-byte sub, optional 't'), so
// that HashKV hashes exactly the bytes etcd hashes and yields etcd's values.
func etcdRevKey(dst, k []byte) []byte {
	dst = append(dst[:0], k[1:9]...)
	dst = append(dst, '_')
	dst = append(dst, k[9:]...)
	return dst
}
