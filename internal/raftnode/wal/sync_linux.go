//go:build linux

package wal

import (
	"fmt"
	"os"
	"syscall"

	"github.com/metastore-io/metastore/internal/faults/diskfault"
)

// SyncData is the default Options.SyncFile: fdatasync(2), which flushes the
// file's data and the metadata needed to read it back (its size) but skips
// timestamps, saving a journal write per commit on most file systems.
func SyncData(f *os.File) error {
	if err := diskfault.BeforeSync(f.Name()); err != nil {
		return err
	}
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
		return nil
	}
}

// preallocate reserves the file's first size bytes on disk and extends
// the file to them (fallocate(2) mode 0, as etcd does for its segments).
// Writes into reserved space do not grow the file, so their fdatasync
// does not have to journal a new size. A file system without fallocate
// is not an error: the log then grows as it is written.
func preallocate(f *os.File, size int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
		switch err {
		case nil, syscall.EOPNOTSUPP, syscall.ENOSYS:
			return nil
		case syscall.EINTR:
			continue
		}
		return fmt.Errorf("preallocate %s: %w", f.Name(), err)
	}
}
