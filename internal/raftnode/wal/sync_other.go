//go:build !linux

package wal

import (
	"fmt"
	"os"

	"github.com/metastore-io/metastore/internal/faults/diskfault"
)

// SyncData is the default Options.SyncFile: a full fsync where fdatasync is
// not available.
func SyncData(f *os.File) error {
	if err := diskfault.BeforeSync(f.Name()); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	return nil
}

// preallocate is a no-op where fallocate(2) is not available: the log
// grows as it is written.
func preallocate(*os.File, int64) error { return nil }
