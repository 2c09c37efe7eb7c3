package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/format/backup"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// The status etcdutl 3.6.16 printed for an etcd snapshot with these
// figures, byte for byte.
const (
	etcdutlTable = `+----------+----------+------------+------------+---------+
|   HASH   | REVISION | TOTAL KEYS | TOTAL SIZE | VERSION |
+----------+----------+------------+------------+---------+
| 8585851e |        2 |          1 |      20 kB |   3.6.0 |
+----------+----------+------------+------------+---------+
`
	etcdutlSimple = "8585851e, 2, 1, 20 kB, 3.6.0\n"
	etcdutlJSON   = `{"hash":2240120094,"revision":2,"totalKey":1,"totalSize":20480,"version":"3.6.0"}` + "\n"
)

func TestStatusPrintersMatchEtcdutl(t *testing.T) {
	st := snapshotStatus{Hash: 0x8585851e, Revision: 2, TotalKey: 1, TotalSize: 20480, Version: "3.6.0"}
	for format, want := range map[string]string{"table": etcdutlTable, "simple": etcdutlSimple, "json": etcdutlJSON} {
		printer, err := statusPrinter(format)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := printer(&out, st); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("-w %s printed\n%s\nwant\n%s", format, out.String(), want)
		}
	}
	if _, err := statusPrinter("yaml"); err == nil {
		t.Error("an unknown output format was accepted")
	}
}

func TestHumanBytesIsGoHumanizes(t *testing.T) {
	// Values go-humanize's Bytes gives, as etcd's tools print them.
	for n, want := range map[uint64]string{
		0: "0 B", 9: "9 B", 544: "544 B", 999: "999 B", 1000: "1.0 kB", 20480: "20 kB",
		2_100_000: "2.1 MB", 9_950_000: "10 MB", 5 << 30: "5.4 GB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// snapshotFile writes the snapshot file of a store holding one key.
func snapshotFile(t *testing.T) string {
	t.Helper()
	kv, err := kvstore.Open(memory.New(), kvstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if _, err := kv.Put(&pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Commit(); err != nil {
		t.Fatal(err)
	}
	view := kv.SnapshotView()
	defer view.Release()
	var buf bytes.Buffer
	if _, err := backup.Write(&buf, view); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runRoot(args ...string) (string, error) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestSnapshotCommands(t *testing.T) {
	path := snapshotFile(t)
	out, err := runRoot("snapshot", "status", path)
	if err != nil {
		t.Fatal(err)
	}
	if fields := strings.Split(strings.TrimSpace(out), ", "); len(fields) != 5 || fields[1] != "2" || fields[2] != "1" || fields[3] != "512 B" {
		t.Fatalf("snapshot status printed %q: want revision 2, 1 key, 512 B", out)
	}

	dataDir := filepath.Join(t.TempDir(), "restored")
	if _, err := runRoot("snapshot", "restore", path, "--data-dir", dataDir, "--name", "r",
		"--initial-cluster", "r=http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380"); err != nil {
		t.Fatal(err)
	}
	if _, exists, err := raftnode.ReadIdentity(filepath.Join(dataDir, "member"), nil); err != nil || !exists {
		t.Fatalf("the restored data dir holds no raft log (%v)", err)
	}
}

func TestSnapshotCommandUsageErrors(t *testing.T) {
	path := snapshotFile(t)
	for _, args := range [][]string{
		{"snapshot", "status"},
		{"snapshot", "status", path, path},
		{"snapshot", "status", path, "-w", "yaml"},
		{"snapshot", "restore"},
		{"snapshot", "restore", path, "--storage-engine", "bbolt"},
		{"snapshot", "restore", path, "--initial-advertise-peer-urls", "localhost"},
		{"snapshot", "restore", path, "--bump-revision", "10"},
		{"snapshot", "restore", path, "--mark-compacted"},
	} {
		_, err := runRoot(args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("metastore %s: %v, want a usage error (exit 2)", strings.Join(args, " "), err)
		}
	}
	// A damaged file is not a usage error (exit 1) and is named.
	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, []byte("not a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runRoot("snapshot", "status", bad)
	var ue usageError
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("status of a damaged file: %v, want an error naming %s", err, bad)
	}
}
