//go:build linux

package wal

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// maxIovecs is IOV_MAX on Linux: the most buffers one writev(2) takes.
const maxIovecs = 1024

// writeBuffersAt writes bufs to f in order from offset off, as one
// pwritev(2) per maxIovecs buffers (more only if the kernel writes
// short), and returns how many bytes it wrote. bufs may be modified.
func writeBuffersAt(f *os.File, bufs [][]byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	total := 0
	for len(bufs) > 0 {
		batch := bufs[:min(len(bufs), maxIovecs)]
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Pwritev(int(fd), batch, off+int64(total))
			return true
		}); err != nil {
			return total, err
		}
		if errors.Is(werr, unix.EINTR) {
			continue
		}
		if werr != nil {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: werr}
		}
		total += n
		progressed := n > 0
		for len(bufs) > 0 && n >= len(bufs[0]) {
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
		if len(bufs) == 0 {
			break
		}
		if !progressed {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		bufs[0] = bufs[0][n:]
	}
	return total, nil
}
