//go:build linux

package wal

import (
	"fmt"
	"os"
	"syscall"

	"github.com/metastore-io/metastore/internal/diskfault"
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
