package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// walFiles lists the *.wal files in dir.
func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".wal") {
			out = append(out, de.Name())
		}
	}
	return out
}

// TestDedicatedWALDir runs a member with --wal-dir: its log lives there,
// not under the data dir, and it restarts from it with its data.
func TestDedicatedWALDir(t *testing.T) {
	walDir := filepath.Join(t.TempDir(), "dedicated-wal")
	s := startServer(t, framework.ClusterConfig{ExtraFlags: []string{"--wal-dir=" + walDir}})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "/waldir/k", "v")
	m := s.member()
	if got := walFiles(t, walDir); len(got) == 0 {
		t.Fatalf("no WAL file in --wal-dir %s", walDir)
	}
	if _, err := os.Stat(filepath.Join(m.DataDir(), "member", "wal")); !os.IsNotExist(err) {
		t.Fatalf("member/wal exists beside --wal-dir: %v", err)
	}
	if _, err := m.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cli := m.NewClient(t)
	if got := mustGet(ctx, t, cli, "/waldir/k"); len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Fatalf("after a restart from --wal-dir: %v", got.Kvs)
	}
}

// TestUnsafeNoFsync starts a member with --unsafe-no-fsync (accepted, as
// etcd; for tests only) and checks that it serves and restarts cleanly.
func TestUnsafeNoFsync(t *testing.T) {
	s := startServer(t, framework.ClusterConfig{ExtraFlags: []string{"--unsafe-no-fsync", "--max-snapshots=0"}})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "/nofsync/k", "v")
	m := s.member()
	if _, err := m.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(ctx, t, m.NewClient(t), "/nofsync/k"); len(got.Kvs) != 1 {
		t.Fatalf("after a clean restart: %v", got.Kvs)
	}
}

// TestForceNewCluster stops every member of a 3-member cluster and
// restarts one with --force-new-cluster: it becomes a one-member cluster
// with all the data, and takes writes alone.
func TestForceNewCluster(t *testing.T) {
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	ctx := testContext(t, clusterTestTimeout)
	mc := newMemberClients(t, c)
	survivor := c.Member(0)
	survivorID := mc.memberID(ctx, t, survivor)
	for i := range 5 {
		mustPut(ctx, t, mc.of(t, survivor), "/force/k"+strconv.Itoa(i), "v")
	}
	mc.requireSameHashKV(ctx, t, c.Members(), 0)
	for _, m := range c.Members() {
		if _, err := m.Stop(stopTimeout); err != nil {
			t.Fatal(err)
		}
	}
	survivor.SetArgs(append(survivor.Args(), "--force-new-cluster"))
	if err := survivor.Restart(ctx); err != nil {
		t.Fatalf("restart with --force-new-cluster: %v", err)
	}
	cli := survivor.NewClient(t)
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 1 || ml.Members[0].ID != survivorID {
		t.Fatalf("members after --force-new-cluster: %v, want only %x", ml.Members, survivorID)
	}
	if got := mustGet(ctx, t, cli, "/force/", clientv3.WithPrefix()); len(got.Kvs) != 5 {
		t.Fatalf("keys after --force-new-cluster: %d, want 5", len(got.Kvs))
	}
	mustPut(ctx, t, cli, "/force/after", "v")
}
