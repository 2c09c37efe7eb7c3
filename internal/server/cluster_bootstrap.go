package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// fetchMembersTimeout bounds asking one running peer for the member list
// when joining an existing cluster.
const fetchMembersTimeout = 5 * time.Second

// identity is who this member is in which cluster, and how raft starts.
type identity struct {
	memberID, clusterID uint64
	// bootstrap holds the initial configuration of a new cluster (fresh
	// data dir, --initial-cluster-state=new).
	bootstrap []raft.Peer
	// join starts raft empty, to be fed by the leader (fresh data dir,
	// --initial-cluster-state=existing).
	join bool
	// peers are the other members to reach before the replicated member
	// list is known: the initial cluster, or the running cluster's list.
	peers map[uint64][]string
}

// resolveIdentity decides this member's identity, as etcd's bootstrap does:
//
//   - a data dir with a log: the IDs recorded in it, whatever
//     --initial-cluster, --initial-cluster-token and
//     --initial-cluster-state say (etcd's bootstrapClusterWithWAL ignores
//     them too, and does not check --name either: a renamed member
//     publishes its new name).
//   - a fresh data dir, new cluster: IDs derived from --initial-cluster and
//     the token; raft bootstraps with every initial member.
//   - a fresh data dir, existing cluster: the member list is fetched from
//     the running members' peer URLs, must match --initial-cluster, and
//     gives this member's ID (the one `member add` chose) and the cluster
//     ID; raft starts empty and the leader sends it the state.
func resolveIdentity(ctx context.Context, cfg Config, memberDir string, client *http.Client) (identity, error) {
	recorded, exists, err := raftnode.ReadIdentityAt(memberDir, cfg.WALDir, cfg.Logger)
	if err != nil {
		return identity{}, fmt.Errorf("server: %w", err)
	}
	if exists {
		return restartIdentity(cfg, memberDir, recorded)
	}
	if cfg.NewCluster {
		return newClusterIdentity(cfg)
	}
	return joinIdentity(ctx, cfg, client)
}

func restartIdentity(cfg Config, memberDir string, recorded raftnode.Identity) (identity, error) {
	id := identity{memberID: recorded.MemberID, clusterID: recorded.ClusterID, peers: map[uint64][]string{}}
	// The flags may still describe this very cluster: then they name the
	// other members' peer URLs before the member list is loaded. Anything
	// else in them (another token, members added or removed since) is
	// ignored, as etcd ignores them once a WAL exists.
	if cfg.NewCluster {
		if derived, err := newClusterIdentity(cfg); err == nil &&
			derived.memberID == recorded.MemberID && derived.clusterID == recorded.ClusterID {
			id.peers = derived.peers
		}
	}
	cfg.Logger.Info("restarting local member from the existing data dir; --initial-cluster, --initial-cluster-token and --initial-cluster-state are ignored",
		"data-dir", filepath.Dir(memberDir), "local-member-id", fmt.Sprintf("%x", recorded.MemberID), "cluster-id", fmt.Sprintf("%x", recorded.ClusterID),
		"initial-cluster-token", cfg.InitialClusterToken, "initial-cluster-state-new", cfg.NewCluster)
	return id, nil
}

// newClusterIdentity derives the IDs from --initial-cluster as etcd does.
func newClusterIdentity(cfg Config) (identity, error) {
	b, err := membership.NewBootstrap(cfg.Name, cfg.InitialCluster, cfg.InitialClusterToken, cfg.PeerURLs)
	if err != nil {
		return identity{}, err
	}
	return identity{memberID: b.MemberID, clusterID: b.ClusterID, bootstrap: b.Peers, peers: b.Others}, nil
}

// joinIdentity fetches the running cluster's member list from the peer
// URLs of --initial-cluster and matches it against the flags (etcd's
// ValidateClusterAndAssignIDs): same member count, every running member's
// peer URLs equal to one --initial-cluster entry's.
func joinIdentity(ctx context.Context, cfg Config, client *http.Client) (identity, error) {
	var urls []string
	for _, m := range cfg.InitialCluster {
		if m.Name != cfg.Name {
			urls = append(urls, m.PeerURLs...)
		}
	}
	if len(urls) == 0 {
		return identity{}, errors.New("--initial-cluster-state=existing but --initial-cluster names no other member to join")
	}
	remote, err := membership.FetchMembers(ctx, client, urls, fetchMembersTimeout)
	if err != nil {
		return identity{}, fmt.Errorf("cannot fetch cluster info from peer urls: %w", err)
	}
	if len(remote.Members) != len(cfg.InitialCluster) {
		return identity{}, fmt.Errorf("error validating peerURLs: member count is unequal: the running cluster has %d members, --initial-cluster names %d", len(remote.Members), len(cfg.InitialCluster))
	}
	id := identity{clusterID: remote.ClusterID, join: true, peers: map[uint64][]string{}}
	for _, rm := range remote.Members {
		i := slices.IndexFunc(cfg.InitialCluster, func(m membership.InitialMember) bool { return membership.SameURLs(m.PeerURLs, rm.PeerURLs) })
		if i < 0 {
			return identity{}, fmt.Errorf("error validating peerURLs: no match found for existing member (%x, %v) in --initial-cluster", rm.ID, rm.PeerURLs)
		}
		if cfg.InitialCluster[i].Name == cfg.Name {
			id.memberID = rm.ID
		} else {
			id.peers[rm.ID] = slices.Clone(rm.PeerURLs)
		}
	}
	if id.memberID == 0 {
		return identity{}, fmt.Errorf("the running cluster has no member with peer URLs %v: add it with `etcdctl member add` first", cfg.PeerURLs)
	}
	return id, nil
}
