//go:build !linux

package wal

import (
	"fmt"
	"os"
)

// SyncData is the default Options.SyncFile: a full fsync where fdatasync is
// not available.
func SyncData(f *os.File) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	return nil
}
