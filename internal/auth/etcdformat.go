package auth

import (
	"fmt"
)

// etcd keeps the same data in three bbolt buckets: "auth" (keys
// "authEnabled" -> {0|1} and "authRevision" -> 8-byte big-endian),
// "authUsers" (name -> authpb.User) and "authRoles" (name -> authpb.Role),
// with the same values as MetaStore's records. ToEtcd and FromEtcd map one
// record between the two layouts for snapshot files (internal/format/etcddb).
const (
	EtcdBucketAuth  = "auth"
	EtcdBucketUsers = "authUsers"
	EtcdBucketRoles = "authRoles"
)

var (
	etcdKeyEnabled  = "authEnabled"
	etcdKeyRevision = "authRevision"
)

// ToEtcd maps a record of the auth bucket (key without the bucket byte)
// to etcd's bucket, key and value; the value is checked.
func ToEtcd(k, v []byte) (bucket string, key, value []byte, err error) {
	if err := newState().decodeRecord(k, v); err != nil {
		return "", nil, nil, err
	}
	switch k[0] {
	case kindMeta:
		if string(k) == string(keyEnabled) {
			return EtcdBucketAuth, []byte(etcdKeyEnabled), v, nil
		}
		return EtcdBucketAuth, []byte(etcdKeyRevision), v, nil
	case kindUser:
		return EtcdBucketUsers, k[1:], v, nil
	default:
		return EtcdBucketRoles, k[1:], v, nil
	}
}

// FromEtcd maps a record of etcd's auth buckets to a record of the auth
// bucket (key without the bucket byte); the value is checked. Keys of the
// "auth" bucket it does not know are skipped (ok false).
func FromEtcd(bucket string, key, value []byte) (k, v []byte, ok bool, err error) {
	switch bucket {
	case EtcdBucketAuth:
		switch string(key) {
		case etcdKeyEnabled:
			k = keyEnabled
		case etcdKeyRevision:
			k = keyRevision
		default:
			return nil, nil, false, nil
		}
	case EtcdBucketUsers:
		k = userKey(string(key))
	case EtcdBucketRoles:
		k = roleKey(string(key))
	default:
		return nil, nil, false, fmt.Errorf("auth: %q is not an etcd auth bucket", bucket)
	}
	if err := newState().decodeRecord(k, value); err != nil {
		return nil, nil, false, err
	}
	return k, value, true, nil
}
