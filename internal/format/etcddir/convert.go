package etcddir

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/format/etcddb"
	"github.com/metastore-io/metastore/internal/host/fileutil"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// The names of a data dir's parts. etcd and MetaStore both keep a
// member's files in <data-dir>/member; a conversion builds MetaStore's
// under stagingName, moves etcd's aside to BackupName and MetaStore's
// into place.
const (
	memberName  = "member"
	BackupName  = "member.etcd"         // etcd's member dir after a conversion
	stagingName = "member.converting"   // a data dir of MetaStore's being built
	doneMarker  = "conversion-complete" // in the staging dir once it is whole
)

// Config describes a conversion.
type Config struct {
	// DataDir is the data dir, holding etcd's member dir.
	DataDir string
	// OpenBackend opens the storage engine of a data dir (as for the
	// member started next, which must use the same engine).
	OpenBackend func(dataDir string) (kvstore.Backend, error)
	// Progress, if set, is told now and then how many of total records
	// of etcd's db are loaded.
	Progress func(done, total int64)
	Logger   *slog.Logger
}

func walDir(dataDir string) string { return filepath.Join(dataDir, memberName, "wal") }

// DBPath is where etcd keeps a member's db in a data dir.
func DBPath(dataDir string) string { return filepath.Join(dataDir, memberName, "snap", "db") }

// IsEtcdDataDir reports whether dataDir holds a member of etcd's: its
// member/wal is in etcd's format.
func IsEtcdDataDir(dataDir string) (bool, error) {
	return IsWAL(walDir(dataDir))
}

// Prepare makes dataDir a MetaStore data dir if it is an etcd one, and
// first finishes a conversion a crash interrupted. It reports whether
// it converted. Anything else (an empty dir, MetaStore's own) is left
// alone.
func Prepare(cfg Config) (bool, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	staging := filepath.Join(cfg.DataDir, stagingName)
	resumed, err := resume(cfg, staging)
	if err != nil || resumed {
		return resumed, err
	}
	isEtcd, err := IsEtcdDataDir(cfg.DataDir)
	if err != nil || !isEtcd {
		return false, err
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, BackupName)); !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("convert etcd data dir %s: %s already exists (an earlier conversion's copy of etcd's files?); move it away first",
			cfg.DataDir, filepath.Join(cfg.DataDir, BackupName))
	}
	start := time.Now()
	if err := build(cfg, staging); err != nil {
		if rerr := os.RemoveAll(staging); rerr != nil {
			cfg.Logger.Warn("could not remove the unfinished conversion", "dir", staging, "error", rerr)
		}
		return false, fmt.Errorf("convert etcd data dir %s: %w", cfg.DataDir, err)
	}
	if err := swap(cfg.DataDir, staging); err != nil {
		return false, err
	}
	cfg.Logger.Info("converted etcd data dir", "data-dir", cfg.DataDir,
		"etcd-files-kept-in", filepath.Join(cfg.DataDir, BackupName), "took", time.Since(start))
	return true, nil
}

// resume finishes or discards a conversion found in staging.
func resume(cfg Config, staging string) (bool, error) {
	if _, err := os.Stat(staging); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if _, err := os.Stat(filepath.Join(staging, doneMarker)); err != nil {
		cfg.Logger.Warn("discarding an unfinished conversion of the etcd data dir; converting again", "dir", staging)
		if err := os.RemoveAll(staging); err != nil {
			return false, fmt.Errorf("remove unfinished conversion %s: %w", staging, err)
		}
		return false, nil
	}
	cfg.Logger.Warn("finishing an interrupted conversion of the etcd data dir", "dir", staging)
	return true, swap(cfg.DataDir, staging)
}

// swap moves etcd's member dir (if still in place) to BackupName and
// the converted one into place. Each step is a rename, so a crash
// between them leaves the staging dir complete and resume repeats what
// is left.
func swap(dataDir, staging string) error {
	member := filepath.Join(dataDir, memberName)
	if isEtcd, err := IsWAL(filepath.Join(member, "wal")); err != nil {
		return err
	} else if isEtcd {
		if err := os.Rename(member, filepath.Join(dataDir, BackupName)); err != nil {
			return fmt.Errorf("move etcd's member dir aside: %w", err)
		}
	}
	if err := os.Rename(filepath.Join(staging, memberName), member); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move the converted member dir into place: %w", err)
	}
	if err := fileutil.SyncDir(dataDir); err != nil {
		return err
	}
	if err := os.RemoveAll(staging); err != nil {
		return fmt.Errorf("remove %s: %w", staging, err)
	}
	return fileutil.SyncDir(dataDir)
}

// source is what a conversion reads from etcd's files.
type source struct {
	db    *etcddb.File
	state etcddb.RaftState
	log   *Log
	ents  []raftpb.Entry
}

// readSource opens the db and reads the WAL from the db's consistent
// index on.
func readSource(cfg Config) (*source, error) {
	dbPath := DBPath(cfg.DataDir)
	if ok, err := etcddb.IsDBFile(dbPath); err != nil || !ok {
		return nil, fmt.Errorf("etcd's WAL is in %s but %s is not a db: %w", walDir(cfg.DataDir), dbPath, err)
	}
	db, err := etcddb.Open(dbPath)
	if err != nil {
		return nil, err
	}
	src := &source{db: db}
	if err := src.read(cfg); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return src, nil
}

func (src *source) read(cfg Config) error {
	var err error
	if src.state, err = src.db.ReadRaftState(); err != nil {
		return err
	}
	ci := src.state.ConsistentIndex
	if src.log, err = ReadWAL(walDir(cfg.DataDir), ci); err != nil {
		return err
	}
	if src.log.TornAt != "" {
		cfg.Logger.Warn("etcd's WAL ends in a torn record (etcd was killed mid-write): reading stops there, as etcd's repair does",
			"at", src.log.TornAt)
	}
	if src.state.Term == 0 {
		src.state.Term = src.log.TermAt
	}
	if src.state.Term == 0 && ci > 0 {
		return fmt.Errorf("neither the db nor the WAL records the term of entry %d", ci)
	}
	src.ents = make([]raftpb.Entry, len(src.log.Entries))
	for i, e := range src.log.Entries {
		if src.ents[i], err = TranslateEntry(e); err != nil {
			return err
		}
	}
	cfg.Logger.Info("read etcd data dir", "member-id", fmt.Sprintf("%x", src.log.MemberID),
		"cluster-id", fmt.Sprintf("%x", src.log.ClusterID), "consistent-index", ci, "term", src.state.Term,
		"wal-entries-to-replay", len(src.ents), "commit-index", src.log.HardState.Commit, "members", len(src.state.Members.Members))
	return nil
}

// build writes the MetaStore member dir into staging/member.
func build(cfg Config, staging string) (err error) {
	if err := os.MkdirAll(filepath.Join(staging, memberName), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", staging, err)
	}
	src, err := readSource(cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, src.db.Close()) }()
	b, err := cfg.OpenBackend(staging)
	if err != nil {
		return fmt.Errorf("open storage engine: %w", err)
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	ld, err := src.db.LoadInto(b, cfg.Progress, cfg.Logger)
	if err != nil {
		return err
	}
	cfg.Logger.Info("loaded etcd's db", "revision", ld.Revision, "compact-revision", ld.CompactRev,
		"records", ld.Keys, "leases", ld.Leases)
	kv, err := kvstore.Open(b, kvstore.Options{Logger: cfg.Logger})
	if err != nil {
		return fmt.Errorf("etcd's db is not a store a member can start from: %w", err)
	}
	defer func() { err = errors.Join(err, kv.Close()) }()
	if err := finishCompaction(kv, ld.ScheduledCompactRev); err != nil {
		return err
	}
	meta := src.carryMembers(kv)
	kv.SetConsistentIndex(meta.Index, meta.Term)
	if _, err := kv.Commit(); err != nil {
		return fmt.Errorf("commit the member list: %w", err)
	}
	if err := seed(staging, src, meta, kv, cfg.Logger); err != nil {
		return err
	}
	return markDone(staging)
}

// finishCompaction runs a compaction etcd scheduled and did not finish,
// as etcd does on start, to the end: nothing else runs on the dir yet.
func finishCompaction(kv *kvstore.Store, scheduled int64) error {
	if scheduled > kv.CompactRev() {
		if _, err := kv.Compact(min(scheduled, kv.Rev())); err != nil && !errors.Is(err, kvstore.ErrCompacted) {
			return fmt.Errorf("run the db's scheduled compaction at %d: %w", scheduled, err)
		}
	}
	for kv.Compacting() {
		if _, err := kv.Commit(); err != nil {
			return fmt.Errorf("compact the converted store: %w", err)
		}
	}
	return nil
}

// carryMembers writes the db's member list into the store and returns
// the raft snapshot the store's state is: the db's consistent index and
// term, with the configuration of those members (etcd changes its member
// list and raft's configuration with the same entries).
//
// A db that was never committed after etcd's first start (consistent
// index 0: etcd killed within its first batch interval) has nothing
// applied: the member then applies the whole log, its conf changes
// included, which add the members.
func (src *source) carryMembers(kv *kvstore.Store) raftpb.SnapshotMetadata {
	cluster := membership.New(src.log.MemberID, src.log.ClusterID)
	meta := raftpb.SnapshotMetadata{Index: src.state.ConsistentIndex, Term: src.state.Term}
	if meta.Index == 0 {
		return meta
	}
	for _, m := range src.state.Members.Members {
		cluster.Add(kv, m)
		if m.RaftAttributes.IsLearner {
			meta.ConfState.Learners = append(meta.ConfState.Learners, m.ID)
		} else {
			meta.ConfState.Voters = append(meta.ConfState.Voters, m.ID)
		}
	}
	for _, id := range src.state.Members.Removed {
		cluster.Remove(kv, id)
	}
	return meta
}

// seed writes the raft files: the store's image as the snapshot at meta,
// and a log that goes on with etcd's entries after it under etcd's hard
// state, so that the member applies them on start.
func seed(staging string, src *source, meta raftpb.SnapshotMetadata, kv *kvstore.Store, logger *slog.Logger) error {
	view := kv.SnapshotView()
	defer view.Release()
	id := raftnode.Identity{MemberID: src.log.MemberID, ClusterID: src.log.ClusterID}
	memberDir := filepath.Join(staging, memberName)
	if err := raftnode.SeedLog(memberDir, "", id, meta, view, src.log.HardState, src.ents, logger); err != nil {
		return err
	}
	return fileutil.SyncDir(memberDir)
}

// markDone records that the staging dir is whole.
func markDone(staging string) error {
	path := filepath.Join(staging, doneMarker)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("mark the conversion complete: %w", err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("mark the conversion complete: %w", err)
	}
	return fileutil.SyncDir(staging)
}
