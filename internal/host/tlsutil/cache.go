package tlsutil

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// fileStamp identifies one version of a file without reading it: a
// rewrite changes the modification time (nanoseconds) or the size, a
// rename over it the inode.
type fileStamp struct {
	size  int64
	mtime time.Time
	inode uint64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.inode = st.Ino
	}
	return s, nil
}

// fileCache holds what parse made of a set of files and parses them again
// only when one of them changed on disk. A failed parse is not cached: the
// next call tries again, so a half-written file is picked up once complete.
type fileCache[T any] struct {
	paths []string
	parse func(contents [][]byte) (T, error)

	mu     sync.Mutex // guards stamps and value
	stamps []fileStamp
	value  T
	loaded bool
}

func newFileCache[T any](parse func([][]byte) (T, error), paths ...string) *fileCache[T] {
	return &fileCache[T]{paths: paths, parse: parse}
}

// get returns the current value, re-reading the files if any changed.
func (c *fileCache[T]) get() (T, error) {
	var zero T
	stamps := make([]fileStamp, len(c.paths))
	for i, p := range c.paths {
		s, err := stampOf(p)
		if err != nil {
			return zero, err
		}
		stamps[i] = s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded && equalStamps(stamps, c.stamps) {
		return c.value, nil
	}
	contents := make([][]byte, len(c.paths))
	for i, p := range c.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return zero, err
		}
		contents[i] = b
	}
	v, err := c.parse(contents)
	if err != nil {
		return zero, err
	}
	// The stamps taken before reading: if a file changed in between, the
	// next call sees a newer stamp and reads it again.
	c.stamps, c.value, c.loaded = stamps, v, true
	return v, nil
}

func equalStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].size != b[i].size || !a[i].mtime.Equal(b[i].mtime) || a[i].inode != b[i].inode {
			return false
		}
	}
	return true
}
