//go:build linux

package raftsnap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// flushBehindBytes is how much of a snapshot file may be written before
// its write-back is started.
const flushBehindBytes = 8 << 20

// flushBehind writes a new file and keeps its dirty pages in the page
// cache bounded: after every flushBehindBytes it starts the write-back of
// what it just wrote (sync_file_range, SYNC_FILE_RANGE_WRITE) and first
// waits for the write-back it started the time before. Without it an
// image of hundreds of MiB lands in the page cache at once, and the
// kernel's write-back of it stalls the WAL: its writes under dirty-page
// throttling and its fdatasyncs, which acknowledge client writes, behind
// the snapshot's data (seen as seconds of well-behaved-client latency
// under a flood of 1.5 MiB puts). The writer is slowed to the disk's pace
// instead. This is not a durability step: the file is fsynced at the end
// as before. An error of sync_file_range is returned, not ignored: the
// kernel reports a write-back error once per open file, so a later fsync
// would not see it again.
type flushBehind struct {
	f       *os.File
	written int64 // bytes written
	started int64 // write-back started up to here
	waited  int64 // write-back waited for up to here
}

func (w *flushBehind) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.written += int64(n)
	if err != nil || w.written-w.started < flushBehindBytes {
		return n, err
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return n, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		if w.started > w.waited {
			serr = unix.SyncFileRange(int(fd), w.waited, w.started-w.waited,
				unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
			if serr != nil {
				return
			}
		}
		serr = unix.SyncFileRange(int(fd), w.started, w.written-w.started, unix.SYNC_FILE_RANGE_WRITE)
	}); err != nil {
		return n, err
	}
	if serr != nil {
		return n, fmt.Errorf("write back %s: %w", w.f.Name(), serr)
	}
	w.waited, w.started = w.started, w.written
	return n, nil
}
