package membership

import (
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3"
)

// Bootstrap is the identity of one member of a new cluster, derived from
// the flags as etcd derives it: every member's ID from its peer URLs and
// the initial-cluster-token, the cluster's from the members'. Both a
// member started with --initial-cluster-state=new and `snapshot restore`
// (which writes the data dir such a member starts from) use it, so the
// two agree on the IDs.
type Bootstrap struct {
	MemberID, ClusterID uint64
	// Peers are raft's initial configuration: one per initial member,
	// each with its membershippb.Member (ID and peer URLs) as context.
	Peers []raft.Peer
	// Others are the other members' peer URLs, by ID.
	Others map[uint64][]string
}

// NewBootstrap derives the identity of the member called name, which
// advertises peerURLs, in the new cluster initial with token. The member
// must be in initial with the same peer URLs.
func NewBootstrap(name string, initial []InitialMember, token string, peerURLs []string) (Bootstrap, error) {
	b := Bootstrap{Others: map[uint64][]string{}}
	ids := make([]uint64, 0, len(initial))
	for _, m := range initial {
		memberID := MemberID(m.PeerURLs, token, nil)
		ids = append(ids, memberID)
		if m.Name == name {
			b.MemberID = memberID
			if !SameURLs(m.PeerURLs, peerURLs) {
				return Bootstrap{}, fmt.Errorf("--initial-cluster has %s=%v but --initial-advertise-peer-urls is %v: they must match", m.Name, m.PeerURLs, peerURLs)
			}
		} else {
			b.Others[memberID] = slices.Clone(m.PeerURLs)
		}
		data, err := (&membershippb.Member{
			ID:             memberID,
			RaftAttributes: &membershippb.RaftAttributes{PeerUrls: m.PeerURLs},
		}).Marshal()
		if err != nil {
			return Bootstrap{}, fmt.Errorf("encode member %s: %w", m.Name, err)
		}
		b.Peers = append(b.Peers, raft.Peer{ID: memberID, Context: data})
	}
	if b.MemberID == 0 {
		return Bootstrap{}, fmt.Errorf("couldn't find local name %q in the initial cluster configuration", name)
	}
	b.ClusterID = ClusterID(ids)
	return b, nil
}

// SameURLs reports whether a and b hold the same URLs in any order.
func SameURLs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
