package member

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/internal/rocksdb"
)

// The storage engines a member runs on (--storage-engine).
const (
	EngineMemory  = "memory"
	EngineRocksDB = "rocksdb"
)

// RocksDBDir is where the RocksDB engine keeps its files in a data dir:
// <data-dir>/member/rocksdb, beside the WAL and snapshots. The command
// and an embedded member use the same place, so a data dir moves
// between them.
func RocksDBDir(dataDir string) string { return filepath.Join(dataDir, "member", "rocksdb") }

// OpenBackend opens the storage engine named engine for the data dir;
// rocks is the RocksDB engine's options, unused by the memory engine.
func OpenBackend(dataDir, engine string, rocks rocksdb.Options) (kvstore.Backend, error) {
	switch engine {
	case EngineMemory:
		return memory.New(), nil
	case EngineRocksDB:
		dir := RocksDBDir(dataDir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		b, err := rocksdb.Open(dir, rocks)
		if err != nil {
			return nil, fmt.Errorf("open RocksDB engine in %s: %w", dir, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown storage engine %q: want %s or %s", engine, EngineMemory, EngineRocksDB)
}
