package etcddb

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/membershippb"
)

// DecodeMember decodes a member as etcd encodes it in its members bucket
// and in the context of its conf-change entries (the JSON of etcd's
// membership.Member).
func DecodeMember(b []byte) (*membershippb.Member, error) {
	var em etcdMember
	if err := json.Unmarshal(b, &em); err != nil {
		return nil, fmt.Errorf("%w: member %q: %w", ErrCorrupt, b, err)
	}
	m := &membershippb.Member{ID: em.ID,
		RaftAttributes: &membershippb.RaftAttributes{PeerUrls: em.PeerURLs, IsLearner: em.IsLearner}}
	if em.Name != "" || len(em.ClientURLs) > 0 {
		m.MemberAttributes = &membershippb.Attributes{Name: em.Name, ClientUrls: em.ClientURLs}
	}
	return m, nil
}

// Members is a data dir's member list as its db records it.
type Members struct {
	Members []*membershippb.Member // in ID order
	Removed []uint64               // in ID order
}

// RaftState is what the db of a data dir records about the raft log: the
// index and term of the last entry applied to it (etcd's consistent
// index), and the members.
type RaftState struct {
	ConsistentIndex, Term uint64
	Members
}

// ReadRaftState reads the consistent index, its term and the member list
// of a member's db (member/snap/db), which a data dir's conversion
// carries over; LoadInto leaves the member list out.
func (f *File) ReadRaftState() (RaftState, error) {
	var st RaftState
	err := f.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: no %s bucket", ErrCorrupt, bucketMeta)
		}
		for _, f := range []struct {
			key []byte
			dst *uint64
		}{{metaConsistentIndex, &st.ConsistentIndex}, {metaTerm, &st.Term}} {
			v := meta.Get(f.key)
			if v == nil {
				continue // etcd before 3.5 kept no term
			}
			if len(v) != 8 {
				return fmt.Errorf("%w: meta %s of %d bytes", ErrCorrupt, f.key, len(v))
			}
			*f.dst = binary.BigEndian.Uint64(v)
		}
		var err error
		st.Members, err = readMembers(tx)
		return err
	})
	return st, err
}

func readMembers(tx *bolt.Tx) (Members, error) {
	var ms Members
	if bk := tx.Bucket(bucketMembers); bk != nil {
		if err := bk.ForEach(func(k, v []byte) error {
			m, err := DecodeMember(v)
			if err != nil {
				return err
			}
			if key := memberKey(m.ID); string(key) != string(k) {
				return fmt.Errorf("%w: member %x under key %q", ErrCorrupt, m.ID, k)
			}
			ms.Members = append(ms.Members, m)
			return nil
		}); err != nil {
			return ms, err
		}
	}
	if bk := tx.Bucket(bucketMembersRemoved); bk != nil {
		if err := bk.ForEach(func(k, _ []byte) error {
			id, err := strconv.ParseUint(string(k), 16, 64)
			if err != nil {
				return fmt.Errorf("%w: removed member key %q", ErrCorrupt, k)
			}
			ms.Removed = append(ms.Removed, id)
			return nil
		}); err != nil {
			return ms, err
		}
	}
	slices.SortFunc(ms.Members, func(a, b *membershippb.Member) int { return cmpID(a.ID, b.ID) })
	slices.Sort(ms.Removed)
	return ms, nil
}

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
