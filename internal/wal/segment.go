package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/metastore-io/metastore/internal/diskfault"
	"github.com/metastore-io/metastore/internal/fileutil"
)

const (
	segmentExt = ".wal"
	tmpExt     = ".tmp"
)

// segment names one file of the log: <seq 16hex>-<firstIndex 16hex>.wal.
// seq orders the files; firstIndex is the index the first entry written to
// the file was expected to have (the log's last index + 1 when the file was
// cut), which is what ReleaseTo needs to decide a file is wholly obsolete
// without reading it.
type segment struct {
	seq        uint64
	firstIndex uint64
}

func (s segment) name() string {
	return fileutil.HexPairName(s.seq, s.firstIndex, segmentExt)
}

// parseSegmentName reports whether name is a segment file name and decodes it.
func parseSegmentName(name string) (segment, bool) {
	seq, first, ok := fileutil.ParseHexPairName(name, segmentExt)
	return segment{seq: seq, firstIndex: first}, ok
}

// listSegments returns the segments in dir ordered by seq, after removing
// leftover temporary files of an interrupted segment creation. Consecutive
// sequence numbers are required: a missing file in the middle means lost
// log records.
func listSegments(dir string) ([]segment, []string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read WAL dir %s: %w", dir, err)
	}
	var segs []segment
	var removedTmp []string
	for _, de := range des {
		name := de.Name()
		if strings.HasSuffix(name, segmentExt+tmpExt) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, nil, fmt.Errorf("remove unfinished segment %s: %w", filepath.Join(dir, name), err)
			}
			removedTmp = append(removedTmp, name)
			continue
		}
		if s, ok := parseSegmentName(name); ok && de.Type().IsRegular() {
			segs = append(segs, s)
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].seq < segs[j].seq })
	for i := 1; i < len(segs); i++ {
		if segs[i].seq != segs[i-1].seq+1 {
			return nil, nil, fmt.Errorf("WAL dir %s: segment %s follows %s (missing segment)", dir, segs[i].name(), segs[i-1].name())
		}
	}
	return segs, removedTmp, nil
}

// createSegment writes head as the first bytes of a new segment file and
// makes it durable before it becomes visible under its final name, so that a
// crash never leaves a segment without its head records. The returned file is
// open for appending.
func createSegment(dir string, s segment, head []byte, syncFile func(*os.File) error) (*os.File, error) {
	final := filepath.Join(dir, s.name())
	tmp := final + tmpExt
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", tmp, err)
	}
	fail := func(err error) (*os.File, error) {
		return nil, errors.Join(err, f.Close(), os.Remove(tmp))
	}
	if err := diskfault.BeforeWrite(tmp); err != nil {
		return fail(err)
	}
	if _, err := f.Write(head); err != nil {
		return fail(fmt.Errorf("write segment head %s: %w", tmp, err))
	}
	if err := syncFile(f); err != nil {
		return fail(fmt.Errorf("sync segment %s: %w", tmp, err))
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(fmt.Errorf("rename segment %s: %w", tmp, err))
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close segment %s: %w", tmp, err)
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	// Reopen under the final name so that errors and logs name the file
	// that exists.
	f, err = os.OpenFile(final, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", final, err)
	}
	return f, nil
}

// syncDir makes file creations, renames and removals in dir durable.
func syncDir(dir string) error { return fileutil.SyncDir(dir) }
