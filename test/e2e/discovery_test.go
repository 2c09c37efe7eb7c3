package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/test/framework"
)

// TestDiscoveryV3Bootstrap bootstraps a three-member cluster through
// etcd's v3 discovery: a one-member cluster of the target is the
// registry, holding the size under the token; three members started with
// --discovery-endpoints and --discovery-token (no --initial-cluster) find
// each other there and form one cluster, whose member IDs derive from
// their peer URLs and the discovery token as etcd derives them. A fourth
// member with the same token finds the cluster full and exits.
func TestDiscoveryV3Bootstrap(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	registry := startServer(t, framework.ClusterConfig{})
	const token = "disco-token"
	mustPut(ctx, t, registry.cli, "/_etcd/registry/"+token+"/_config/size", "3")

	dir := t.TempDir()
	p := freePorts(t, 8)
	start := func(i int) (*rawMember, string, string) {
		name := fmt.Sprintf("d%d", i)
		c := fmt.Sprintf("http://127.0.0.1:%d", p[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", p[2*i+1])
		mdir := filepath.Join(dir, name)
		args := []string{
			"--name=" + name, "--data-dir=" + filepath.Join(mdir, "data"),
			"--listen-client-urls=" + c, "--advertise-client-urls=" + c,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--discovery-endpoints=" + registry.member().ClientURL(), "--discovery-token=" + token,
		}
		if err := os.MkdirAll(mdir, 0o700); err != nil {
			t.Fatal(err)
		}
		return startRaw(t, mdir, args), c, peer
	}
	var clients, peers []string
	var members []*rawMember
	for i := range 3 {
		m, c, peer := start(i)
		members, clients, peers = append(members, m), append(clients, c), append(peers, peer)
	}
	for i, m := range members {
		m.waitReady(ctx, clients[i])
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: clients, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	var ids []uint64
	for i, peer := range peers {
		id := membership.MemberID([]string{peer}, token, nil)
		ids = append(ids, id)
		want = append(want, fmt.Sprintf("%x d%d %s %s", id, i, peer, clients[i]))
	}
	for _, m := range list.Members {
		got = append(got, fmt.Sprintf("%x %s %s %s", m.ID, m.Name, strings.Join(m.PeerURLs, ","), strings.Join(m.ClientURLs, ",")))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("members\n got %q\nwant %q", got, want)
	}
	if cid := membership.ClusterID(ids); list.Header.ClusterId != cid {
		t.Errorf("cluster ID %x, want %x (from the members' IDs)", list.Header.ClusterId, cid)
	}
	mustPut(ctx, t, cli, "after-discovery", "v")

	fourth, _, _ := start(3)
	code, out := fourth.waitExit(ctx)
	if code == 0 || !strings.Contains(out, "discovery: cluster is full") {
		t.Errorf("a fourth member with the same token: exit %d, output:\n%s", code, tail(out, 20))
	}
}
