package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
