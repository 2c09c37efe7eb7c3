package membership

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/etcd/api/v3/membershippb"
)

// Bucket is the store's auxiliary bucket holding the member list.
const Bucket byte = 'c'

// Keys inside Bucket: memberKeyPrefix+ID -> membershippb.Member,
// removedKeyPrefix+ID -> empty (IDs may never be reused), and the one key
// versionKey -> the cluster version ("3.6.0"), once a leader has set it,
// and the one key downgradeKey -> the downgrade target ("3.5.0") while a
// downgrade job is enabled (downgrade.go).
const (
	memberKeyPrefix    = 'm'
	removedKeyPrefix   = 'r'
	versionKeyPrefix   = 'v'
	downgradeKeyPrefix = 'd'
)

// versionKey is the cluster version's key inside Bucket.
var versionKey = []byte{versionKeyPrefix}

// VersionRecord is the backend record, bucket byte included, that holds
// the cluster version: for converters that write whole backends
// (internal/format/etcddb); a running member uses SetVersion.
func VersionRecord(version string) (key, value []byte) {
	return append([]byte{Bucket}, versionKey...), []byte(version)
}

// IsVersionRecord reports whether key (without the bucket byte) is the
// cluster version's record rather than a member's.
func IsVersionRecord(key []byte) bool { return len(key) == 1 && key[0] == versionKeyPrefix }

// AuxWriter buffers writes into the batch of the entry being applied.
type AuxWriter interface {
	PutAux(bucket byte, key, value []byte)
	DeleteAux(bucket byte, key []byte)
}

// AuxReader reads the committed auxiliary buckets.
type AuxReader interface {
	AscendAux(bucket byte, fn func(key, value []byte) bool) error
}

// Cluster is the replicated member list. Reads are safe from any goroutine;
// the mutating methods are called only from the apply goroutine, with the
// AuxWriter of the entry being applied, so the change and the entry commit
// atomically.
type Cluster struct {
	localID   uint64
	clusterID uint64 // set once by New

	// mu guards members, removed, version and downgrade. Lock order: mu is a leaf,
	// held only while they are read or replaced; the mutating methods
	// write the entry's AuxWriter after Unlock, so no other lock and no
	// I/O is ever taken under it.
	mu      sync.RWMutex
	members map[uint64]*membershippb.Member
	removed map[uint64]bool
	// version is the cluster version a leader recorded through raft
	// (etcd's ClusterVersionSet); empty until then.
	version string
	// downgrade is the downgrade job (etcd's DowngradeInfoSet).
	downgrade Downgrade
}

// New returns an empty member list for the member localID of clusterID.
func New(localID, clusterID uint64) *Cluster {
	return &Cluster{
		localID:   localID,
		clusterID: clusterID,
		members:   map[uint64]*membershippb.Member{},
		removed:   map[uint64]bool{},
	}
}

// ID is the cluster ID. It is set once by New, so it is read without
// the lock: every response header carries it.
func (c *Cluster) ID() uint64 { return c.clusterID }

// LocalID is this member's ID.
func (c *Cluster) LocalID() uint64 { return c.localID }

// Load replaces the in-memory list with the one persisted in r (on start and
// after a snapshot restore).
func (c *Cluster) Load(r AuxReader) error {
	members := map[uint64]*membershippb.Member{}
	removed := map[uint64]bool{}
	version := ""
	var downgrade Downgrade
	var decodeErr error
	err := r.AscendAux(Bucket, func(key, value []byte) bool {
		if IsVersionRecord(key) {
			version = string(value)
			return true
		}
		if IsDowngradeRecord(key) {
			downgrade = Downgrade{Enabled: true, TargetVersion: string(value)}
			return true
		}
		m, removedID, err := DecodeRecord(key, value)
		switch {
		case err != nil:
			decodeErr = err
			return false
		case m != nil:
			members[m.ID] = m
		default:
			removed[removedID] = true
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("membership: read bucket: %w", err)
	}
	if decodeErr != nil {
		return decodeErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members, c.removed, c.version, c.downgrade = members, removed, version, downgrade
	return nil
}

// Version is the cluster version recorded through raft, "" if none yet.
func (c *Cluster) Version() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.version
}

// SetVersion records the cluster version (apply side).
func (c *Cluster) SetVersion(w AuxWriter, version string) {
	c.mu.Lock()
	c.version = version
	c.mu.Unlock()
	w.PutAux(Bucket, versionKey, []byte(version))
}

// Members returns copies of all members ordered by ID.
func (c *Cluster) Members() []*membershippb.Member {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*membershippb.Member, 0, len(c.members))
	for _, m := range c.members {
		out = append(out, cloneMember(m))
	}
	slices.SortFunc(out, func(a, b *membershippb.Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// Member returns a copy of the member with this ID, or nil.
func (c *Cluster) Member(id uint64) *membershippb.Member {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if m, ok := c.members[id]; ok {
		return cloneMember(m)
	}
	return nil
}

// IsRemoved reports whether id was a member and was removed.
func (c *Cluster) IsRemoved(id uint64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.removed[id]
}

// IsLearner reports whether the member id is a learner.
func (c *Cluster) IsLearner(id uint64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.members[id]
	return ok && m.RaftAttributes != nil && m.RaftAttributes.IsLearner
}

// Add records a new member (apply side).
func (c *Cluster) Add(w AuxWriter, m *membershippb.Member) {
	m = cloneMember(m)
	c.mu.Lock()
	c.members[m.ID] = m
	c.mu.Unlock()
	c.persist(w, m)
}

// Remove deletes a member and remembers its ID as removed (apply side).
func (c *Cluster) Remove(w AuxWriter, id uint64) {
	c.mu.Lock()
	delete(c.members, id)
	c.removed[id] = true
	c.mu.Unlock()
	w.DeleteAux(Bucket, key(memberKeyPrefix, id))
	w.PutAux(Bucket, key(removedKeyPrefix, id), nil)
}

// SetAttributes sets a member's name and client URLs (apply side). Unknown
// IDs are ignored, as etcd ignores attributes published by a removed member.
func (c *Cluster) SetAttributes(w AuxWriter, id uint64, attrs *membershippb.Attributes) {
	if attrs == nil {
		attrs = &membershippb.Attributes{}
	}
	c.update(w, id, func(m *membershippb.Member) {
		m.MemberAttributes = &membershippb.Attributes{Name: attrs.Name, ClientUrls: slices.Clone(attrs.ClientUrls)}
	})
}

// SetPeerURLs replaces a member's peer URLs (apply side).
func (c *Cluster) SetPeerURLs(w AuxWriter, id uint64, peerURLs []string) {
	c.update(w, id, func(m *membershippb.Member) {
		if m.RaftAttributes == nil {
			m.RaftAttributes = &membershippb.RaftAttributes{}
		}
		m.RaftAttributes.PeerUrls = slices.Clone(peerURLs)
	})
}

// Promote turns a learner into a voting member (apply side).
func (c *Cluster) Promote(w AuxWriter, id uint64) {
	c.update(w, id, func(m *membershippb.Member) {
		if m.RaftAttributes == nil {
			m.RaftAttributes = &membershippb.RaftAttributes{}
		}
		m.RaftAttributes.IsLearner = false
	})
}

func (c *Cluster) update(w AuxWriter, id uint64, change func(*membershippb.Member)) {
	c.mu.Lock()
	m, ok := c.members[id]
	if ok {
		m = cloneMember(m)
		change(m)
		c.members[id] = m
	}
	c.mu.Unlock()
	if ok {
		c.persist(w, m)
	}
}

func (c *Cluster) persist(w AuxWriter, m *membershippb.Member) {
	data, err := m.Marshal()
	if err != nil {
		// Marshal of a well-formed generated message cannot fail.
		panic(fmt.Sprintf("membership: marshal member: %v", err))
	}
	w.PutAux(Bucket, key(memberKeyPrefix, m.ID), data)
}

// DecodeRecord decodes one entry of Bucket (key without the bucket
// byte) other than the cluster records (IsClusterRecord): a member, or the
// ID of a removed member. Converters of whole
// backends (internal/format/etcddb) use it; a running member uses Load.
func DecodeRecord(key, value []byte) (m *membershippb.Member, removedID uint64, err error) {
	if len(key) != 9 {
		return nil, 0, fmt.Errorf("membership: malformed key %x", key)
	}
	id := binary.BigEndian.Uint64(key[1:])
	switch key[0] {
	case memberKeyPrefix:
		m := &membershippb.Member{}
		if err := m.Unmarshal(value); err != nil {
			return nil, 0, fmt.Errorf("membership: decode member %x: %w", id, err)
		}
		return m, 0, nil
	case removedKeyPrefix:
		return nil, id, nil
	}
	return nil, 0, fmt.Errorf("membership: unknown key %x", key)
}

func key(prefix byte, id uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

func cloneMember(m *membershippb.Member) *membershippb.Member {
	out := &membershippb.Member{ID: m.ID}
	if ra := m.RaftAttributes; ra != nil {
		out.RaftAttributes = &membershippb.RaftAttributes{PeerUrls: slices.Clone(ra.PeerUrls), IsLearner: ra.IsLearner}
	}
	if ma := m.MemberAttributes; ma != nil {
		out.MemberAttributes = &membershippb.Attributes{Name: ma.Name, ClientUrls: slices.Clone(ma.ClientUrls)}
	}
	return out
}
