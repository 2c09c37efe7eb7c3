package rocksdb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/metastore-io/metastore/internal/host/fileutil"
)

// Names inside the engine directory; doc.go draws the layout.
const (
	activeFile    = "ACTIVE"     // names the live database directory
	activeTmpFile = "ACTIVE.tmp" // ACTIVE being replaced
	lockFile      = "LOCK"       // flock held while a Backend is open
	dbDirPrefix   = "db-"        // db-000001, db-000002, ...
	stagingSuffix = ".ingest"    // SST files a Restore is building
	dbNameDigits  = 6            // zero padding of generation numbers
	dirPerm       = fs.FileMode(0o750)
	filePerm      = fs.FileMode(0o640)
)

// dbName is the directory name of generation n.
func dbName(n uint64) string {
	return fmt.Sprintf("%s%0*d", dbDirPrefix, dbNameDigits, n)
}

// parseDBName is the inverse of dbName.
func parseDBName(name string) (uint64, error) {
	digits, ok := strings.CutPrefix(name, dbDirPrefix)
	if !ok || len(digits) < dbNameDigits {
		return 0, fmt.Errorf("%q is not a database directory name", name)
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a database directory name", name)
	}
	return n, nil
}

// readActive returns the generation ACTIVE names, or 0 if there is no
// ACTIVE file (a directory never opened, or whose first Open crashed
// before any batch could have been committed).
func readActive(dir string) (uint64, error) {
	data, err := os.ReadFile(filepath.Join(dir, activeFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", activeFile, err)
	}
	n, err := parseDBName(strings.TrimSuffix(string(data), "\n"))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", activeFile, err)
	}
	return n, nil
}

// writeActive durably points ACTIVE at generation n: write a temporary
// file, fsync it, rename it over ACTIVE, fsync the directory. A crash
// leaves either the old or the new pointer, never a torn one.
func writeActive(dir string, n uint64) error {
	tmp := filepath.Join(dir, activeTmpFile)
	if err := writeFileSync(tmp, []byte(dbName(n)+"\n")); err != nil {
		return fmt.Errorf("write %s: %w", activeTmpFile, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, activeFile)); err != nil {
		return fmt.Errorf("install %s: %w", activeFile, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("install %s: %w", activeFile, err)
	}
	return nil
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, filePerm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error { return fileutil.SyncDir(dir) }

// syncTree fsyncs every file and directory under root, root included, so
// that a database built outside RocksDB's normal write path (a restore's
// ingested files, a checkpoint's hard links) is durable before ACTIVE
// names it.
func syncTree(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("fsync %s: %w", path, err)
		}
		return f.Close()
	})
}

// removeStrays deletes what an interrupted Open or Restore left behind:
// every database or staging directory but the active one, and a
// half-written ACTIVE.tmp. Unknown names are left alone.
func removeStrays(dir string, active uint64) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	keep := dbName(active)
	for _, e := range entries {
		name := e.Name()
		stray := name == activeTmpFile ||
			(strings.HasPrefix(name, dbDirPrefix) && name != keep)
		if !stray {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("remove leftover %s: %w", name, err)
		}
	}
	return nil
}

// dirLock is an exclusive flock on dir/LOCK. RocksDB locks each database
// directory itself, but Open also deletes stray directories beside the
// live one, which must never happen under another process's feet.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s (is another process using it?): %w", dir, err)
	}
	return &dirLock{f: f}, nil
}

// release drops the lock (closing the descriptor releases the flock).
func (l *dirLock) release() error {
	return l.f.Close()
}
