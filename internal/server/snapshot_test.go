package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/format/backup"
	"github.com/metastore-io/metastore/internal/format/etcddb"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/member/restore"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/internal/rocksdb"
	"github.com/metastore-io/metastore/test/testutil"
)

// saveSnapshot writes s's snapshot to a file, as etcdctl snapshot save
// does, and returns its path.
func saveSnapshot(t *testing.T, ctx context.Context, s *Server) string {
	t.Helper()
	img, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	defer img.Release()
	var buf bytes.Buffer
	n, err := img.WriteTo(&buf)
	if err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	if n != img.Size() || int64(buf.Len()) != n {
		t.Fatalf("snapshot announced %d bytes, wrote %d (reported %d)", img.Size(), buf.Len(), n)
	}
	path := filepath.Join(t.TempDir(), "snapshot.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func openMemory(string) (kvstore.Backend, error) { return memory.New(), nil }

// openRocksDB opens the RocksDB engine of a data dir where cmd/metastore
// keeps it.
func openRocksDB(dataDir string) (kvstore.Backend, error) {
	return rocksdb.Open(filepath.Join(dataDir, "member", "rocksdb"), rocksdb.DefaultOptions())
}

// restoredConfig is a member of a new one-member cluster (another name,
// peer URL and token than testConfig's) on dataDir.
func restoredConfig(t *testing.T, dataDir string) Config {
	cfg := testConfig(t, dataDir)
	peer := "http://127.0.0.1:22380"
	cfg.Name, cfg.PeerURLs, cfg.InitialClusterToken = "restored", []string{peer}, "restored-token"
	cfg.InitialCluster = []membership.InitialMember{{Name: "restored", PeerURLs: []string{peer}}}
	return cfg
}

func restoreConfigFor(cfg Config, snapshot string, open func(string) (kvstore.Backend, error)) restore.Config {
	return restore.Config{
		SnapshotPath:        snapshot,
		DataDir:             cfg.DataDir,
		Name:                cfg.Name,
		InitialCluster:      cfg.InitialCluster,
		InitialClusterToken: cfg.InitialClusterToken,
		PeerURLs:            cfg.PeerURLs,
		OpenBackend:         open,
		Logger:              cfg.Logger,
	}
}

func TestRestoredMemberHoldsTheSnapshotsState(t *testing.T) {
	// The file names no engine: a member on either restores onto either.
	for _, tc := range []struct {
		name     string
		src, dst func(string) (kvstore.Backend, error)
	}{
		{"memory to memory", openMemory, openMemory},
		{"memory to rocksdb", openMemory, openRocksDB},
		{"rocksdb to memory", openRocksDB, openMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			srcCfg := testConfig(t, t.TempDir())
			srcBackend, err := tc.src(srcCfg.DataDir)
			if err != nil {
				t.Fatal(err)
			}
			srcCfg.Backend = srcBackend
			src := startServer(t, srcCfg)
			defer src.Stop()
			for i := range 30 {
				mustPut(t, src, ctx, fmt.Sprintf("key/%02d", i), 0)
			}
			grant, err := src.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 600})
			if err != nil {
				t.Fatal(err)
			}
			mustPut(t, src, ctx, "leased", grant.ID)
			if _, err := src.Compact(ctx, &pb.CompactionRequest{Revision: 5}); err != nil {
				t.Fatal(err)
			}
			revAtSnapshot := src.Rev()
			path := saveSnapshot(t, ctx, src)
			mustPut(t, src, ctx, "after-the-snapshot", 0)
			src.Stop()

			st, err := etcddb.ReadStatus(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Revision != revAtSnapshot || st.TotalKey != 31 || st.Version != "3.6.0" {
				t.Fatalf("status %+v: want revision %d, 31 keys, version 3.6.0", st, revAtSnapshot)
			}

			cfg := restoredConfig(t, filepath.Join(t.TempDir(), "restored"))
			if err := restore.DataDir(restoreConfigFor(cfg, path, tc.dst)); err != nil {
				t.Fatal(err)
			}
			backend, err := tc.dst(cfg.DataDir)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Backend = backend
			s := startServer(t, cfg)
			defer s.Stop()

			if s.ClusterID() == src.ClusterID() || s.ID() == src.ID() {
				t.Fatalf("restored member %x of cluster %x has the IDs of the source (%x of %x)", s.ID(), s.ClusterID(), src.ID(), src.ClusterID())
			}
			members := s.Members()
			if len(members) != 1 || members[0].ID != s.ID() || members[0].MemberAttributes == nil || members[0].MemberAttributes.Name != "restored" ||
				members[0].RaftAttributes == nil || !slices.Equal(members[0].RaftAttributes.PeerUrls, cfg.PeerURLs) {
				t.Fatalf("members %v: want only the restored member", members)
			}
			all, err := s.Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
			if err != nil {
				t.Fatal(err)
			}
			if all.Count != 31 || all.Header.Revision != revAtSnapshot {
				t.Fatalf("restored member has %d keys at revision %d, want 31 at %d", all.Count, all.Header.Revision, revAtSnapshot)
			}
			if _, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("key/00"), Revision: 4}); !errors.Is(err, kvstore.ErrCompacted) {
				t.Fatalf("read below the compaction: %v, want ErrCompacted", err)
			}
			if keys := leaseKeys(t, s, ctx, grant.ID); !slices.Equal(keys, []string{"leased"}) {
				t.Fatalf("lease %x keys %v, want [leased]", grant.ID, keys)
			}
			put, err := s.Put(ctx, &pb.PutRequest{Key: []byte("new"), Value: []byte("v")})
			if err != nil {
				t.Fatal(err)
			}
			if put.Header.Revision != revAtSnapshot+1 {
				t.Fatalf("first write got revision %d, want %d", put.Header.Revision, revAtSnapshot+1)
			}
		})
	}
}

func TestSnapshotIsPointInTimeWhileWritesGoOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s := startServer(t, testConfig(t, t.TempDir()))
	defer s.Stop()
	for i := range 20 {
		mustPut(t, s, ctx, fmt.Sprintf("before/%02d", i), 0)
	}
	rev := s.Rev()
	img, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Release()
	// Writes are applied while the image is held open.
	for i := range 20 {
		mustPut(t, s, ctx, fmt.Sprintf("during/%02d", i), 0)
	}
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := etcddb.ReadStatus(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Revision != rev || st.TotalKey != 20 {
		t.Fatalf("snapshot holds %d keys at revision %d, want 20 at %d", st.TotalKey, st.Revision, rev)
	}
}

func TestSnapshotOfAStoppedMemberFails(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	s.Stop()
	if _, err := s.Snapshot(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("snapshot of a stopped member: %v, want ErrStopped", err)
	}
}

// TestStopWaitsForOpenSnapshot: a member stopping while a snapshot is
// being sent fails the send and closes its store only once the image is
// released, so the send never reads a closed store.
func TestStopWaitsForOpenSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s := startServer(t, testConfig(t, t.TempDir()))
	mustPut(t, s, ctx, "k", 0)
	img, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go s.Stop()
	testutil.WaitFor(t, testTimeout, "stop to wait for the open image", func() bool {
		return s.users.isClosed()
	})
	if _, err := img.WriteTo(io.Discard); !errors.Is(err, ErrStopped) {
		t.Fatalf("send of a snapshot while stopping: %v, want ErrStopped", err)
	}
	select {
	case <-s.Done():
		t.Fatal("the member stopped with a snapshot image still open")
	default:
	}
	img.Release()
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("the member did not stop once the image was released")
	}
}

func TestRestoreRefusesAndLeavesNothingBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	src := startServer(t, testConfig(t, t.TempDir()))
	for i := range 50 { // a file of several blocks, to truncate by one
		mustPut(t, src, ctx, fmt.Sprintf("key/%02d", i), 0)
	}
	good := saveSnapshot(t, ctx, src)
	src.Stop()
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(t.TempDir(), "corrupt.db")
	data[100] ^= 1
	if err := os.WriteFile(corrupt, data, 0o600); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.db")
	if err := os.WriteFile(truncated, data[:len(data)-512], 0o600); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		change func(*restore.Config)
		want   string
	}{
		"corrupt file":                {func(c *restore.Config) { c.SnapshotPath = corrupt }, corrupt + ": not a valid etcd snapshot file: expected sha256"},
		"truncated file":              {func(c *restore.Config) { c.SnapshotPath = truncated }, truncated + ": not a valid etcd snapshot file: expected sha256"},
		"bump without mark-compacted": {func(c *restore.Config) { c.RevisionBump = 10 }, "--mark-compacted required"},
		"missing file":                {func(c *restore.Config) { c.SnapshotPath = good + ".absent" }, "no such file"},
		"name not listed":             {func(c *restore.Config) { c.Name = "stranger" }, `couldn't find local name "stranger"`},
		"engine fails": {func(c *restore.Config) {
			c.OpenBackend = func(string) (kvstore.Backend, error) { return nil, errors.New("disk on fire") }
		}, "disk on fire"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			cfg := restoreConfigFor(restoredConfig(t, filepath.Join(parent, "restored")), good, openMemory)
			tc.change(&cfg)
			err := restore.DataDir(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want an error saying %q", err, tc.want)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Fatalf("a failed restore left %v behind", left)
			}
		})
	}

	t.Run("data dir not empty", func(t *testing.T) {
		cfg := restoreConfigFor(restoredConfig(t, t.TempDir()), good, openMemory)
		if err := os.WriteFile(filepath.Join(cfg.DataDir, "precious"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		err := restore.DataDir(cfg)
		if err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("restore into a used data dir: %v, want a refusal", err)
		}
	})
	t.Run("empty data dir is fine", func(t *testing.T) {
		cfg := restoreConfigFor(restoredConfig(t, t.TempDir()), good, openMemory)
		if err := restore.DataDir(cfg); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRestoreBumpsRevisionAndMarksItCompacted is a Kubernetes-style
// restore (--bump-revision --mark-compacted): the restored member's
// revision is the snapshot's plus the bump, every older revision is
// compacted, and the next write takes the revision after the bump.
func TestRestoreBumpsRevisionAndMarksItCompacted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	src := startServer(t, testConfig(t, t.TempDir()))
	for i := range 10 {
		mustPut(t, src, ctx, fmt.Sprintf("key/%d", i%3), 0)
	}
	rev := src.Rev()
	path := saveSnapshot(t, ctx, src)
	src.Stop()

	cfg := restoredConfig(t, filepath.Join(t.TempDir(), "restored"))
	rc := restoreConfigFor(cfg, path, openMemory)
	rc.RevisionBump, rc.MarkCompacted = 1000, true
	if err := restore.DataDir(rc); err != nil {
		t.Fatal(err)
	}
	cfg.Backend = memory.New()
	// The memory engine keeps nothing on disk: the member restarts from
	// the restored raft snapshot file.
	s := startServer(t, cfg)
	defer s.Stop()
	if s.Rev() != rev+1000 || s.kv.CompactRev() != rev+1000 {
		t.Fatalf("restored member at revision %d compacted at %d, want both %d", s.Rev(), s.kv.CompactRev(), rev+1000)
	}
	if _, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("key/0"), Revision: rev}); !errors.Is(err, kvstore.ErrCompacted) {
		t.Fatalf("read at the snapshot's revision: %v, want ErrCompacted", err)
	}
	got, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("key/"), RangeEnd: []byte("key0")})
	if err != nil || got.Count != 3 {
		t.Fatalf("keys after the bump: %v, %v; want 3", got, err)
	}
	put, err := s.Put(ctx, &pb.PutRequest{Key: []byte("new"), Value: []byte("v")})
	if err != nil || put.Header.Revision != rev+1001 {
		t.Fatalf("first write: %v, %v; want revision %d", put, err, rev+1001)
	}
}

// TestRestoreOfMetaStoresOldFormat: files saved before snapshots were in
// etcd's format (package backup) still restore.
func TestRestoreOfMetaStoresOldFormat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	src := startServer(t, testConfig(t, t.TempDir()))
	for i := range 10 {
		mustPut(t, src, ctx, fmt.Sprintf("key/%d", i), 0)
	}
	rev := src.Rev()
	view := src.kv.SnapshotView()
	var buf bytes.Buffer
	_, err := backup.Write(&buf, view)
	view.Release()
	src.Stop()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := restoredConfig(t, filepath.Join(t.TempDir(), "restored"))
	var progressed int64
	rc := restoreConfigFor(cfg, path, openMemory)
	rc.Progress = func(done, total int64) { progressed = done }
	if err := restore.DataDir(rc); err != nil {
		t.Fatal(err)
	}
	if progressed == 0 {
		t.Error("no progress was reported")
	}
	cfg.Backend = memory.New()
	s := startServer(t, cfg)
	defer s.Stop()
	if s.Rev() != rev {
		t.Fatalf("restored member at revision %d, want %d", s.Rev(), rev)
	}
}

// TestRestoreWithADedicatedWALDir is etcdutl's --wal-dir: the log goes
// to its own directory, which must not exist yet, and the member started
// with the same WALDir restarts from the snapshot.
func TestRestoreWithADedicatedWALDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	src := startServer(t, testConfig(t, t.TempDir()))
	for i := range 5 {
		mustPut(t, src, ctx, fmt.Sprintf("key/%d", i), 0)
	}
	rev := src.Rev()
	path := saveSnapshot(t, ctx, src)
	src.Stop()

	cfg := restoredConfig(t, filepath.Join(t.TempDir(), "restored"))
	cfg.WALDir = filepath.Join(t.TempDir(), "log")
	rc := restoreConfigFor(cfg, path, openMemory)
	rc.WALDir = cfg.WALDir
	if err := os.Mkdir(rc.WALDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := restore.DataDir(rc); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("restore into an existing wal-dir: %v", err)
	}
	if err := os.Remove(rc.WALDir); err != nil {
		t.Fatal(err)
	}
	if err := restore.DataDir(rc); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(rc.WALDir); err != nil || len(entries) == 0 {
		t.Fatalf("wal-dir holds %v (%v), want the log", entries, err)
	}
	cfg.Backend = memory.New()
	s := startServer(t, cfg)
	defer s.Stop()
	if s.Rev() != rev {
		t.Fatalf("restored member at revision %d, want %d", s.Rev(), rev)
	}
}
