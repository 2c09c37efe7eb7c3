package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/format/backup"
	"github.com/metastore-io/metastore/internal/format/etcddb"
	"github.com/metastore-io/metastore/internal/host/fileutil"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// restoredTerm is the raft term of the snapshot a restored data dir starts
// from. Its index is the number of initial members, as if each had been
// added by one entry of term 1 (etcdutl's layout); the members' first
// election is then of term 2.
const restoredTerm = 1

// memberDirName is the member's folder in a data dir (raftnode's files,
// the RocksDB engine's), as a member started on it expects.
const memberDirName = "member"

// Config describes the data dir `metastore snapshot restore`
// creates: which snapshot file, and which member of which new cluster it
// is for. Name, InitialCluster, InitialClusterToken and PeerURLs mean
// what they mean in server.Config, and the member must be started with the same
// values: they derive the new member and cluster IDs.
type Config struct {
	SnapshotPath        string
	DataDir             string
	Name                string
	InitialCluster      []membership.InitialMember
	InitialClusterToken string
	PeerURLs            []string
	// WALDir, if set, receives the Raft log instead of the data dir, as
	// etcdutl's --wal-dir; the member is then started with the same
	// --wal-dir. It must not exist.
	WALDir string
	// SkipHashCheck accepts an etcd snapshot without a digest (a db
	// file copied from a data dir) or with a wrong one, as etcdutl's
	// --skip-hash-check. MetaStore's own format is always verified.
	SkipHashCheck bool
	// RevisionBump and MarkCompacted are etcdutl's --bump-revision and
	// --mark-compacted: raise the restored store's revision by
	// RevisionBump and mark it compacted (both or neither).
	RevisionBump  uint64
	MarkCompacted bool
	// OpenBackend opens the storage engine of a data dir, the engine
	// the member will be started with (as for server.Config.Backend).
	OpenBackend func(dataDir string) (kvstore.Backend, error)
	// Progress, if set, is told now and then how many of total units
	// (records of an etcd snapshot, bytes of a MetaStore one) are loaded.
	Progress func(done, total int64)
	Logger   *slog.Logger
}

// ErrBumpWithoutCompact is etcdutl's refusal of --bump-revision without
// --mark-compacted or the other way round.
var ErrBumpWithoutCompact = errors.New("--mark-compacted required if --revision-bump > 0")

// DataDir creates cfg.DataDir from a snapshot file, as etcdutl
// snapshot restore does: the new member starts with the snapshot's keys,
// revisions, compaction point and leases, while the member list of the
// cluster it was saved from is replaced by the initial cluster of the
// flags, under a new cluster ID. The file is verified (sha256, framing)
// before anything is created.
//
// The data dir is built with the code a running member uses: the
// records go into the storage engine, the MVCC store opens on it, the
// member list is rewritten through package membership, and the result
// seeds the member's Raft files (raftnode.Seed) as a snapshot recorded as
// installed, as if a leader had sent it. On start the
// member restarts from that snapshot. Everything is written under a
// temporary name next to DataDir and renamed into place at the end, so
// an interrupted restore leaves no data dir a member would start from.
func DataDir(cfg Config) error {
	start := time.Now()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkRestoreTarget(cfg); err != nil {
		return err
	}
	who, err := membership.NewBootstrap(cfg.Name, cfg.InitialCluster, cfg.InitialClusterToken, cfg.PeerURLs)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	src, err := openSnapshotSource(cfg)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	defer func() {
		if err := src.close(); err != nil {
			cfg.Logger.Warn("could not close the snapshot file", "error", err)
		}
	}()
	cfg.Logger.Info("restoring snapshot", "path", cfg.SnapshotPath, "format", src.format, "data-dir", cfg.DataDir,
		"member-id", fmt.Sprintf("%x", who.MemberID), "cluster-id", fmt.Sprintf("%x", who.ClusterID))
	rev, err := buildDataDirInPlace(cfg, src, who)
	if err != nil {
		return err
	}
	cfg.Logger.Info("restored snapshot", "path", cfg.SnapshotPath, "data-dir", cfg.DataDir, "revision", rev,
		"member-id", fmt.Sprintf("%x", who.MemberID), "cluster-id", fmt.Sprintf("%x", who.ClusterID),
		"took", time.Since(start))
	return nil
}

// checkRestoreTarget refuses, before anything is read or created, the
// options etcdutl refuses and a data dir or WAL dir a restore would
// write over.
func checkRestoreTarget(cfg Config) error {
	if cfg.DataDir == "" {
		return errors.New("restore snapshot: no data dir")
	}
	if (cfg.RevisionBump > 0) != cfg.MarkCompacted || cfg.RevisionBump > math.MaxInt64/2 {
		return ErrBumpWithoutCompact
	}
	if err := checkEmptyDir(cfg.DataDir); err != nil {
		return err
	}
	if cfg.WALDir != "" {
		// etcdutl's refusal: a restore never writes into a log.
		if _, err := os.Stat(cfg.WALDir); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("restore snapshot: wal-dir %q exists", cfg.WALDir)
		}
	}
	return nil
}

// buildDataDirInPlace builds the data dir under a temporary name next to
// cfg.DataDir and renames it into place once complete; on error it
// removes what it wrote (the WAL dir included). It returns the store
// revision the data dir holds.
func buildDataDirInPlace(cfg Config, src *snapshotSource, who membership.Bootstrap) (int64, error) {
	parent := filepath.Dir(filepath.Clean(cfg.DataDir))
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return 0, fmt.Errorf("restore snapshot: create the parent of %s: %w", cfg.DataDir, err)
	}
	staging, err := os.MkdirTemp(parent, filepath.Base(cfg.DataDir)+".restoring-")
	if err != nil {
		return 0, fmt.Errorf("restore snapshot: create a temporary data dir next to %s: %w", cfg.DataDir, err)
	}
	done := false
	defer func() {
		if done {
			return
		}
		for _, dir := range []string{staging, cfg.WALDir} {
			if dir == "" {
				continue
			}
			if err := os.RemoveAll(dir); err != nil {
				cfg.Logger.Warn("could not remove an unfinished directory of the restore", "dir", dir, "error", err)
			}
		}
	}()
	rev, err := buildDataDir(cfg, staging, src, who)
	if err != nil {
		return 0, fmt.Errorf("restore snapshot %s: %w", cfg.SnapshotPath, err)
	}
	// An existing DataDir was empty (checkRestoreTarget); os.Remove
	// deletes only an empty directory, so nothing that appeared since is
	// lost.
	if err := os.Remove(cfg.DataDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("restore snapshot: replace the empty data dir %s: %w", cfg.DataDir, err)
	}
	if err := os.Rename(staging, cfg.DataDir); err != nil {
		return 0, fmt.Errorf("restore snapshot: move the restored data dir into place: %w", err)
	}
	done = true
	if err := fileutil.SyncDir(parent); err != nil {
		return 0, fmt.Errorf("restore snapshot: %w", err)
	}
	return rev, nil
}

// checkEmptyDir refuses a data dir that exists with anything in it, as
// etcdutl does: a restore never overwrites a member's data.
func checkEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || len(entries) > 0 {
		return fmt.Errorf("restore snapshot: data-dir %q not empty or could not be read", dir)
	}
	return nil
}

// snapshotSource is a verified snapshot file of either format, ready to
// load into an empty storage engine.
type snapshotSource struct {
	format string
	// load fills the engine and returns a compaction the store must
	// still run once open (an etcd file's unfinished one), or 0.
	load  func(b kvstore.Backend) (scheduledCompact int64, err error)
	close func() error
}

// openSnapshotSource tells the formats apart by their first bytes (a
// bbolt database's magic, or MetaStore's) and verifies the file's
// digest before anything is created.
func openSnapshotSource(cfg Config) (*snapshotSource, error) {
	isEtcd, err := etcddb.IsDBFile(cfg.SnapshotPath)
	if err != nil {
		return nil, err
	}
	if !isEtcd {
		file, err := backup.Open(cfg.SnapshotPath)
		if err != nil {
			return nil, err
		}
		file.Progress = cfg.Progress
		return &snapshotSource{
			format: "metastore",
			load: func(b kvstore.Backend) (int64, error) {
				_, err := file.LoadInto(b)
				return 0, err
			},
			close: file.Close,
		}, nil
	}
	if err := etcddb.VerifyDigest(cfg.SnapshotPath, cfg.SkipHashCheck); err != nil {
		return nil, err
	}
	file, err := etcddb.Open(cfg.SnapshotPath)
	if err != nil {
		return nil, err
	}
	return &snapshotSource{
		format: "etcd",
		load: func(b kvstore.Backend) (int64, error) {
			ld, err := file.LoadInto(b, cfg.Progress, cfg.Logger)
			if err != nil {
				return 0, err
			}
			cfg.Logger.Info("loaded etcd snapshot", "revision", ld.Revision, "compact-revision", ld.CompactRev,
				"records", ld.Keys, "leases", ld.Leases)
			return ld.ScheduledCompactRev, nil
		},
		close: file.Close,
	}, nil
}

// buildDataDir writes the member's data dir into dir and returns the
// store revision it holds.
func buildDataDir(cfg Config, dir string, src *snapshotSource, who membership.Bootstrap) (rev int64, err error) {
	memberDir := filepath.Join(dir, memberDirName)
	if err := os.MkdirAll(memberDir, 0o700); err != nil {
		return 0, fmt.Errorf("create %s: %w", memberDir, err)
	}
	b, err := cfg.OpenBackend(dir)
	if err != nil {
		return 0, fmt.Errorf("open storage engine: %w", err)
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	scheduledCompact, err := src.load(b)
	if err != nil {
		return 0, err
	}
	kv, err := kvstore.Open(b, kvstore.Options{Logger: cfg.Logger})
	if err != nil {
		return 0, fmt.Errorf("the snapshot's content is not a store a member can start from: %w", err)
	}
	defer func() { err = errors.Join(err, kv.Close()) }()
	if err := finishRevisions(kv, scheduledCompact, cfg); err != nil {
		return 0, err
	}
	// Nothing else runs on the new data dir yet: finish deleting the
	// compacted revisions now rather than on the member's first start.
	for kv.Compacting() {
		if _, err := kv.Commit(); err != nil {
			return 0, fmt.Errorf("compact the restored store: %w", err)
		}
	}

	meta := raftpb.SnapshotMetadata{Index: uint64(len(who.Peers)), Term: restoredTerm}
	for _, p := range who.Peers {
		meta.ConfState.Voters = append(meta.ConfState.Voters, p.ID)
	}
	if err := resetMembers(kv, who); err != nil {
		return 0, err
	}
	// The store now holds the state after the snapshot's last entry.
	kv.SetConsistentIndex(meta.Index, meta.Term)
	if _, err := kv.Commit(); err != nil {
		return 0, fmt.Errorf("commit the new member list: %w", err)
	}
	if err := saveRaftSnapshot(kv, memberDir, cfg.WALDir, meta, who, cfg.Logger); err != nil {
		return 0, err
	}
	if err := fileutil.SyncDir(memberDir); err != nil {
		return 0, err
	}
	if err := fileutil.SyncDir(dir); err != nil {
		return 0, err
	}
	return kv.Rev(), nil
}

// finishRevisions runs an etcd file's unfinished compaction, as etcd
// does on start, then etcdutl's --bump-revision --mark-compacted.
func finishRevisions(kv *kvstore.Store, scheduledCompact int64, cfg Config) error {
	if scheduledCompact > kv.CompactRev() {
		if _, err := kv.Compact(min(scheduledCompact, kv.Rev())); err != nil && !errors.Is(err, kvstore.ErrCompacted) {
			return fmt.Errorf("run the snapshot's scheduled compaction at %d: %w", scheduledCompact, err)
		}
	}
	if cfg.MarkCompacted {
		if err := kv.BumpRevision(int64(cfg.RevisionBump)); err != nil {
			return err
		}
	}
	return nil
}

// resetMembers replaces the member list with the initial cluster's, as
// the state machine records it from a new cluster's bootstrap entries, and
// keeps the recorded cluster version.
func resetMembers(kv *kvstore.Store, who membership.Bootstrap) error {
	var old [][]byte
	if err := kv.AscendAux(membership.Bucket, func(key, _ []byte) bool {
		// The cluster version and the downgrade job stay, as etcdutl's
		// restore keeps etcd's cluster bucket: the new cluster does not
		// record the version again.
		if !membership.IsClusterRecord(key) {
			old = append(old, slices.Clone(key))
		}
		return true
	}); err != nil {
		return fmt.Errorf("read the old member list: %w", err)
	}
	for _, key := range old {
		kv.DeleteAux(membership.Bucket, key)
	}
	members := membership.New(who.MemberID, who.ClusterID)
	for _, p := range who.Peers {
		var m membershippb.Member
		if err := m.Unmarshal(p.Context); err != nil {
			return fmt.Errorf("decode initial member %x: %w", p.ID, err)
		}
		if err := members.ValidateAdd(&m, math.MaxInt); err != nil {
			return fmt.Errorf("initial member %x: %w", m.ID, err)
		}
		members.Add(kv, &m)
	}
	return nil
}

// saveRaftSnapshot makes the store's state the member's Raft snapshot at
// meta (raftnode.Seed): the snapshot file in the engine's own image
// format, and a log that records it as installed.
func saveRaftSnapshot(kv *kvstore.Store, memberDir, walDir string, meta raftpb.SnapshotMetadata, who membership.Bootstrap, logger *slog.Logger) error {
	view := kv.SnapshotView()
	defer view.Release()
	return raftnode.SeedAt(memberDir, walDir, raftnode.Identity{MemberID: who.MemberID, ClusterID: who.ClusterID}, meta, view, logger)
}
