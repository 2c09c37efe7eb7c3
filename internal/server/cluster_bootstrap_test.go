package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// A data dir with a log restarts as the member and cluster the log names,
// whatever the --initial-cluster flags derive, with either
// --initial-cluster-state (etcd's bootstrapClusterWithWAL).
func TestRestartIdentityComesFromTheLog(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	memberDir := filepath.Join(cfg.DataDir, "member")
	meta := raftpb.SnapshotMetadata{Index: 1, Term: 1, ConfState: raftpb.ConfState{Voters: []uint64{0xabc}}}
	if err := raftnode.Seed(memberDir, raftnode.Identity{MemberID: 0xabc, ClusterID: 0xdef}, meta, emptyImage{}, nil); err != nil {
		t.Fatal(err)
	}
	for _, newCluster := range []bool{true, false} {
		cfg.NewCluster = newCluster
		id, err := resolveIdentity(context.Background(), cfg, memberDir, http.DefaultClient)
		if err != nil || id.memberID != 0xabc || id.clusterID != 0xdef || id.join || id.bootstrap != nil {
			t.Fatalf("restart with --initial-cluster-state new=%v: %+v, %v", newCluster, id, err)
		}
	}
}

// Joining reads the running cluster's /members and takes the ID that
// `member add` gave this member's peer URLs.
func TestJoinIdentityFromRunningCluster(t *testing.T) {
	running := membersOnlyServer(t)
	srv := httptest.NewServer(running.PeerHandler())
	defer srv.Close()
	running.cluster.Add(auxDiscard{}, &membershippb.Member{ID: 0x1, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{srv.URL}},
		MemberAttributes: &membershippb.Attributes{Name: "m0"}})
	running.cluster.Add(auxDiscard{}, &membershippb.Member{ID: 0x2, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{"http://new:2380"}, IsLearner: true}})

	cfg := testConfig(t, t.TempDir())
	cfg.Name, cfg.NewCluster, cfg.PeerURLs = "new", false, []string{"http://new:2380"}
	cfg.InitialCluster = []membership.InitialMember{{Name: "m0", PeerURLs: []string{srv.URL}}, {Name: "new", PeerURLs: []string{"http://new:2380"}}}
	id, err := resolveIdentity(context.Background(), cfg, filepath.Join(cfg.DataDir, "member"), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if id.memberID != 0x2 || id.clusterID != running.cluster.ID() || !id.join || len(id.peers[0x1]) != 1 {
		t.Fatalf("join identity %+v", id)
	}
	// A flag set that does not match the running cluster is refused.
	cfg.InitialCluster = cfg.InitialCluster[1:]
	if _, err := resolveIdentity(context.Background(), cfg, filepath.Join(cfg.DataDir, "member"), srv.Client()); err == nil {
		t.Fatal("an --initial-cluster that does not match the running cluster was accepted")
	}
}

// membersOnlyServer is a server value with just a member list, enough to serve
// /members.
func membersOnlyServer(t *testing.T) *Server {
	t.Helper()
	return &Server{cluster: membership.New(0x1, 0x77), log: testConfig(t, t.TempDir()).Logger}
}

type auxDiscard struct{}

func (auxDiscard) PutAux(byte, []byte, []byte) {}
func (auxDiscard) DeleteAux(byte, []byte)      {}

// emptyImage is a state machine image with nothing in it.
type emptyImage struct{}

func (emptyImage) WriteTo(io.Writer) (int64, error) { return 0, nil }
func (emptyImage) Release()                         {}
