package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/raftnode/wal"
)

// The layout of a member directory (Config.DataDir) is known only to this
// file: other packages ask ReadIdentity and Seed rather than open the
// WAL or snapshot files themselves.
const (
	walDirName  = "wal"  // the Raft log (package wal)
	snapDirName = "snap" // snapshot files (package raftsnap)
)

func walDir(dataDir string) string { return filepath.Join(dataDir, walDirName) }

// walDirOf is the log's directory: the dedicated one (--wal-dir) if set.
func walDirOf(dataDir, dedicated string) string {
	if dedicated != "" {
		return dedicated
	}
	return walDir(dataDir)
}
func snapDir(dataDir string) string { return filepath.Join(dataDir, snapDirName) }

// Identity is the member and cluster a Raft log was created for; Start
// refuses a data directory whose log belongs to another.
type Identity struct {
	MemberID, ClusterID uint64
}

// ReadIdentity reports whether dataDir (a Config.DataDir) holds a Raft
// log and, if it does, the identity it was created for. A missing
// directory holds none.
func ReadIdentity(dataDir string, logger *slog.Logger) (id Identity, exists bool, err error) {
	return ReadIdentityAt(dataDir, "", logger)
}

// ReadIdentityAt is ReadIdentity for a member whose log lives in a
// dedicated directory (Config.WALDir; "" for the default under dataDir).
func ReadIdentityAt(dataDir, dedicatedWALDir string, logger *slog.Logger) (id Identity, exists bool, err error) {
	dir := walDirOf(dataDir, dedicatedWALDir)
	exists, err = wal.Exists(dir)
	if err != nil || !exists {
		return Identity{}, false, err
	}
	w, rec, err := wal.Open(dir, wal.Options{Logger: logger})
	if err != nil {
		return Identity{}, true, fmt.Errorf("raftnode: read member identity from %s: %w", dir, err)
	}
	if err := w.Close(); err != nil {
		return Identity{}, true, fmt.Errorf("raftnode: close %s after reading the member identity: %w", dir, err)
	}
	return Identity{MemberID: rec.Metadata.MemberID, ClusterID: rec.Metadata.ClusterID}, true, nil
}

// Seed creates the Raft files of a new member directory whose state
// machine already holds the state after entry meta.Index (a restored
// backup): the snapshot file with img's full image, and a log for id
// that records that snapshot as installed, with a hard state that
// commits it. Started on dataDir with the same identity, the member
// restarts from the snapshot as if a leader had sent it. dataDir must not
// hold a log yet. If img persists in place its engine is made durable
// first, so the state machine holds what the snapshot describes.
func Seed(dataDir string, id Identity, meta raftpb.SnapshotMetadata, img Image, logger *slog.Logger) error {
	return SeedAt(dataDir, "", id, meta, img, logger)
}

// SeedAt is Seed with the log in a dedicated directory (Config.WALDir,
// etcdutl's restore --wal-dir; "" for the default under dataDir).
func SeedAt(dataDir, dedicatedWALDir string, id Identity, meta raftpb.SnapshotMetadata, img Image, logger *slog.Logger) error {
	return SeedLog(dataDir, dedicatedWALDir, id, meta, img, raftpb.HardState{Term: meta.Term, Commit: meta.Index}, nil, logger)
}

// SeedLog is SeedAt for a log that goes on after the snapshot: the
// member's raft log continues with ents (from meta.Index+1 on, in order)
// under hard state hs, as when a data dir of etcd's is converted. Its
// committed entries are applied when the member starts, through the
// member's own apply path; the others are the log's uncommitted tail,
// which raft commits or replaces as it would have. With meta.Index 0
// (nothing applied yet) there is no snapshot: the log starts at entry 1.
func SeedLog(dataDir, dedicatedWALDir string, id Identity, meta raftpb.SnapshotMetadata, img Image,
	hs raftpb.HardState, ents []raftpb.Entry, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for i := range ents {
		if ents[i].Index != meta.Index+1+uint64(i) {
			return fmt.Errorf("raftnode: seed: entry %d does not follow snapshot %d and %d entries", ents[i].Index, meta.Index, i)
		}
	}
	logDir := walDirOf(dataDir, dedicatedWALDir)
	exists, err := wal.Exists(logDir)
	if err != nil {
		return fmt.Errorf("raftnode: seed: %w", err)
	}
	if exists {
		return fmt.Errorf("raftnode: seed %s: it already holds a raft log", dataDir)
	}
	if p, ok := inPlace(img); ok {
		if err := p.Persist(); err != nil {
			return fmt.Errorf("raftnode: seed: make the storage engine durable: %w", err)
		}
	}
	if meta.Index > 0 {
		snaps, err := raftsnap.Open(snapDir(dataDir), raftsnap.Options{Logger: logger})
		if err != nil {
			return fmt.Errorf("raftnode: seed: %w", err)
		}
		if _, err := snaps.Save(meta, img); err != nil {
			return fmt.Errorf("raftnode: seed: save snapshot %d: %w", meta.Index, err)
		}
	}
	w, err := wal.Create(logDir, wal.Metadata{MemberID: id.MemberID, ClusterID: id.ClusterID}, wal.Options{Logger: logger})
	if err != nil {
		return fmt.Errorf("raftnode: seed: create WAL: %w", err)
	}
	var saveErr error
	if meta.Index > 0 {
		saveErr = w.SaveInstall(wal.Snapshot{Index: meta.Index, Term: meta.Term}, hs, ents)
	} else {
		// Nothing applied yet: the log from its first entry, as a
		// member's own before its first snapshot.
		saveErr = w.Save(hs, ents)
	}
	if err := errors.Join(saveErr, w.Close()); err != nil {
		return fmt.Errorf("raftnode: seed: write WAL: %w", err)
	}
	return nil
}
