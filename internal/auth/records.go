package auth

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/etcd/api/v3/authpb"
)

// Record keys inside the store's auth bucket (kvstore.BucketAuth). The
// first byte says what a record is:
//
//	'm' 'e'        -> 1 byte: 1 when authentication is enabled, else 0
//	'm' 'r'        -> 8-byte big-endian auth revision
//	'u' + name     -> authpb.User in protobuf wire format (etcd's record)
//	'r' + name     -> authpb.Role in protobuf wire format (etcd's record)
//
// For example, after `user add root`, `role add root` (implicit), `user
// grant-role root root` and `auth enable` the bucket holds
//
//	m e    -> 01
//	m r    -> 00 00 00 00 00 00 00 03
//	u root -> {name:"root" password:<bcrypt hash> roles:["root"]}
//
// (the root role needs no record: like etcd, granting "root" does not
// require the role to exist, and the root role's permission is implicit).
const (
	kindMeta byte = 'm'
	kindUser byte = 'u'
	kindRole byte = 'r'
)

var (
	keyEnabled  = []byte{kindMeta, 'e'}
	keyRevision = []byte{kindMeta, 'r'}
)

func userKey(name string) []byte { return append([]byte{kindUser}, name...) }
func roleKey(name string) []byte { return append([]byte{kindRole}, name...) }

// AuxWriter buffers writes into the store's auth bucket; they commit
// atomically with the raft entry that made them (*kvstore.Store).
type AuxWriter interface {
	PutAux(bucket byte, key, value []byte)
	DeleteAux(bucket byte, key []byte)
}

// AuxReader reads the committed auth bucket (*kvstore.Store).
type AuxReader interface {
	AscendAux(bucket byte, fn func(key, value []byte) bool) error
}

// decodeRecords builds the state the records of the auth bucket describe.
// It never panics on bad input: a record it cannot decode is an error
// naming the key.
func decodeRecords(r AuxReader, bucket byte) (*state, error) {
	st := newState()
	var err error
	if aerr := r.AscendAux(bucket, func(k, v []byte) bool {
		err = st.decodeRecord(k, v)
		return err == nil
	}); aerr != nil {
		return nil, fmt.Errorf("auth: read records: %w", aerr)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// decodeRecord adds the record key -> value to st.
func (st *state) decodeRecord(k, v []byte) error {
	if len(k) == 0 {
		return fmt.Errorf("auth: empty record key")
	}
	switch k[0] {
	case kindMeta:
		switch string(k) {
		case string(keyEnabled):
			if len(v) != 1 || v[0] > 1 {
				return fmt.Errorf("auth: record %q: bad enabled flag %x", k, v)
			}
			st.enabled = v[0] == 1
		case string(keyRevision):
			if len(v) != 8 {
				return fmt.Errorf("auth: record %q: bad revision %x", k, v)
			}
			st.rev = binary.BigEndian.Uint64(v)
		default:
			return fmt.Errorf("auth: unknown meta record %q", k)
		}
	case kindUser:
		u := &authpb.User{}
		if err := u.Unmarshal(v); err != nil {
			return fmt.Errorf("auth: decode user record %q: %w", k[1:], err)
		}
		if string(u.Name) != string(k[1:]) {
			return fmt.Errorf("auth: user record %q names %q", k[1:], u.Name)
		}
		st.users[string(u.Name)] = u
	case kindRole:
		r := &authpb.Role{}
		if err := r.Unmarshal(v); err != nil {
			return fmt.Errorf("auth: decode role record %q: %w", k[1:], err)
		}
		if string(r.Name) != string(k[1:]) {
			return fmt.Errorf("auth: role record %q names %q", k[1:], r.Name)
		}
		st.roles[string(r.Name)] = r
	default:
		return fmt.Errorf("auth: unknown record kind %q", k[0])
	}
	return nil
}

func encodeRevision(rev uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], rev)
	return b[:]
}

func encodeEnabled(on bool) []byte {
	if on {
		return []byte{1}
	}
	return []byte{0}
}

func mustMarshal(m interface{ Marshal() ([]byte, error) }) []byte {
	b, err := m.Marshal()
	if err != nil {
		// gogo's Marshal of a well-formed message in memory cannot fail.
		panic(fmt.Sprintf("auth: marshal record: %v", err))
	}
	return b
}
