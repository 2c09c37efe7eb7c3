package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/metastore-io/metastore/internal/faults/diskfault"
	"github.com/metastore-io/metastore/internal/host/fileutil"
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

// createSegment writes head as the first bytes of a new segment file,
// reserves reserve bytes for it (0: none; see Options.Preallocate), and
// makes it durable before it becomes visible under its final name, so that
// a crash never leaves a segment without its head records. The returned
// file is open for writing (at positions: the WAL writes after its last
// record, not at the end of the reserved space).
func createSegment(dir string, s segment, head []byte, reserve int64, syncFile func(*os.File) error) (*os.File, error) {
	final := filepath.Join(dir, s.name())
	tmp := final + tmpExt
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
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
	if reserve > int64(len(head)) {
		if err := preallocate(f, reserve); err != nil {
			return fail(err)
		}
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
	f, err = os.OpenFile(final, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", final, err)
	}
	return f, nil
}

// syncDir makes file creations, renames and removals in dir durable.
func syncDir(dir string) error { return fileutil.SyncDir(dir) }

// readChunk is how much of a segment file is read at a time.
const readChunk = 1 << 20

// readSegmentFile returns the bytes of a segment up to where its reserved
// space begins: zeros from a record boundary to the end of the file, which
// preallocation leaves (Options.Preallocate). reserved reports whether
// such space was found (and left out). Only the records are held in
// memory, not the segment's full reserved size. Anything else, a torn or
// damaged tail included, is returned as it is for scanRecords to judge.
func readSegmentFile(path string) (data []byte, reserved bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	data = make([]byte, 0, min(st.Size(), readChunk))
	frame := 0 // the start of the first record not yet walked
	for {
		for len(data)-frame >= headerSize {
			if isZero(data[frame : frame+headerSize]) {
				if rest, err := zeroFrom(f, data[frame:]); err != nil || !rest {
					// Not reserved space: let the scan see all of it.
					whole, err := os.ReadFile(path)
					return whole, false, err
				}
				return data[:frame], true, nil
			}
			next := frame + headerSize + int(binary.LittleEndian.Uint32(data[frame:]))
			if next > len(data) {
				break
			}
			frame = next
		}
		n, err := readMore(f, &data)
		if n == 0 || errors.Is(err, io.EOF) {
			return data, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// readMore appends up to readChunk bytes of f to *data.
func readMore(f *os.File, data *[]byte) (int, error) {
	d := slices.Grow(*data, readChunk)
	n, err := f.Read(d[len(d) : len(d)+readChunk])
	*data = d[:len(d)+n]
	return n, err
}

// zeroFrom reports whether head and everything left to read in f are
// zeros.
func zeroFrom(f *os.File, head []byte) (bool, error) {
	if !isZero(head) {
		return false, nil
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		if !isZero(buf[:n]) {
			return false, nil
		}
		if errors.Is(err, io.EOF) || (n == 0 && err == nil) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
