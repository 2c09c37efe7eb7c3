//go:build !linux

package wal

import "os"

// writeBuffersAt writes bufs to f in order from offset off and returns
// how many bytes it wrote.
func writeBuffersAt(f *os.File, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := f.WriteAt(b, off+int64(total))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
