package linearizability

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/metastore-io/metastore/test/framework"
)

// The tornwal fault leaves the end of a killed member's newest WAL segment
// the way a crash in the middle of a write does: after the last complete
// record comes part of a record that was never acknowledged (its write
// had not returned, so nothing that depends on it was sent anywhere).
// Bytes already in the file are never changed: they may have been fsynced
// and acknowledged, and losing them is another fault (lost durable data),
// which Raft does not tolerate.
//
// The two targets write different WAL formats:
//
//   - MetaStore (internal/raftnode/wal) writes records length u32 | crc32c u32 |
//     type u8 | payload into segments preallocated with zeros (its
//     reserve, which Open keeps) or, cut back, at their end. A crash
//     leaves part of a frame header, a header and part of its payload, a
//     record whose sectors after some boundary are still zero, or stale
//     bytes of a reused block after the last record. (Zeros alone are not
//     torn: they are the reserve.)
//   - etcd preallocates 64 MiB segments full of zeros and writes frames
//     length u64 (top byte: padding) | walpb.Record, padded to 8 bytes,
//     into them. A disk writes whole 512-byte sectors, so a torn etcd
//     write is a frame whose sectors up to some boundary made it and the
//     rest are still zero; etcd repairs exactly that (its decoder's
//     isTornEntry), while a frame torn inside a sector is corruption it
//     refuses, as a real disk never produces one.

const (
	// walSubdir is where both targets keep the Raft log under --data-dir.
	walSubdir = "member/wal"
	// sectorSize is the unit a disk writes atomically.
	sectorSize = 512
	// metastore frame header: length u32 | crc32c u32 | type u8.
	msHeaderSize  = 9
	msRecordEntry = 2
	// etcd frame header: length u64; walpb.Record type 2 is an entry.
	etcdHeaderSize  = 8
	etcdRecordEntry = 2
)

// errNoWAL says a member has no WAL segment yet: one killed right after
// it started on an empty data dir.
var errNoWAL = errors.New("no WAL segment")

// castagnoli is the CRC-32C table of MetaStore's WAL frames.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// newestWALSegment is the last segment of the log under dataDir: segment
// names are <seq 16hex>-<index 16hex>.wal in both formats, so the
// greatest name has the greatest sequence number.
func newestWALSegment(dataDir string) (string, error) {
	names, err := filepath.Glob(filepath.Join(dataDir, walSubdir, "*.wal"))
	if err != nil {
		return "", err
	}
	if len(names) == 0 {
		return "", fmt.Errorf("%w under %s", errNoWAL, filepath.Join(dataDir, walSubdir))
	}
	return slices.Max(names), nil
}

// entryPayload is a raftpb.Entry as a proposal would make it, with
// random data of 16 bytes to 3 sectors.
func entryPayload(rng *rand.Rand) []byte {
	data := make([]byte, 16+rng.IntN(3*sectorSize))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	e := raftpb.Entry{Term: 1 + rng.Uint64N(1<<10), Index: 1 + rng.Uint64N(1<<30), Type: raftpb.EntryNormal, Data: data}
	b, err := e.Marshal()
	if err != nil {
		panic(fmt.Sprintf("marshal a raftpb.Entry: %v", err)) // a plain struct always marshals
	}
	return b
}

// tearWALTail damages the newest WAL segment of a stopped member of
// target, in one of the shapes a crash mid-write leaves, and says what it
// did.
func tearWALTail(target framework.Target, dataDir string, rng *rand.Rand) (string, error) {
	path, err := newestWALSegment(dataDir)
	if err != nil {
		return "", err
	}
	if target == framework.TargetEtcd {
		return tearEtcdTail(path, rng)
	}
	return tearMetastoreTail(path, rng)
}

// metastoreFrame is one complete MetaStore WAL record holding payload.
func metastoreFrame(payload []byte) []byte {
	frame := make([]byte, msHeaderSize+len(payload))
	binary.LittleEndian.PutUint32(frame, uint32(len(payload)))
	frame[8] = msRecordEntry
	copy(frame[msHeaderSize:], payload)
	binary.LittleEndian.PutUint32(frame[4:], crc32.Checksum(frame[8:], castagnoli))
	return frame
}

// metastoreDataEnd is the offset just past the last record of a MetaStore
// segment: where its preallocated zeros (its reserve) begin, or its end.
func metastoreDataEnd(data []byte) (int, error) {
	off := 0
	for off+msHeaderSize <= len(data) {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if n == 0 && binary.LittleEndian.Uint32(data[off+4:]) == 0 && data[off+8] == 0 {
			return off, nil // a zero header: the reserve
		}
		if n > len(data)-off-msHeaderSize {
			return 0, fmt.Errorf("record at %d runs %d bytes past the end", off, n)
		}
		off += msHeaderSize + n
	}
	return off, nil
}

// tearMetastoreTail writes a torn record after the last complete one of a
// MetaStore segment: into its preallocated zeros (which a zeroed tail
// therefore is not: it is the reserve, and stays), or past its end when
// it has none (a segment cut back to its records). The bytes written
// always hold a non-zero one, or they would read as the reserve.
func tearMetastoreTail(path string, rng *rand.Rand) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	end, err := metastoreDataEnd(data)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	frame := metastoreFrame(entryPayload(rng))
	var tail []byte
	var what string
	switch rng.IntN(4) {
	case 0:
		// The length field's low byte is the first one written; a
		// payload length that is a multiple of 256 would leave a lone
		// zero byte, which no crash tells from the reserve.
		n := 1 + rng.IntN(msHeaderSize-1)
		for frame[0] == 0 {
			frame = metastoreFrame(entryPayload(rng))
		}
		tail, what = frame[:n], fmt.Sprintf("%d of %d header bytes", n, msHeaderSize)
	case 1:
		n := rng.IntN(len(frame) - msHeaderSize)
		tail, what = frame[:msHeaderSize+n], fmt.Sprintf("a header and %d of %d payload bytes", n, len(frame)-msHeaderSize)
	case 2:
		// The sectors of a record up to a boundary inside it made it;
		// the rest is the reserve's zeros, or past the end.
		boundary := (end+msHeaderSize)/sectorSize*sectorSize + sectorSize - end
		for len(frame) <= boundary {
			frame = metastoreFrame(entryPayload(rng))
		}
		tail, what = frame[:boundary], fmt.Sprintf("the first %d bytes of a %d-byte record (up to a sector boundary)", boundary, len(frame))
	default:
		tail = make([]byte, 1+rng.IntN(8*sectorSize))
		for i := range tail {
			tail[i] = byte(rng.Uint32())
		}
		tail[0] |= 1
		what = fmt.Sprintf("%d bytes of garbage", len(tail))
	}
	if err := writeAt(path, tail, int64(end)); err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %s at offset %d of %s (%d bytes)", what, end, filepath.Base(path), len(data)), nil
}

// etcdFrame is one complete etcd WAL frame of a walpb.Record holding
// payload (its CRC is random: it is never meant to be read whole).
func etcdFrame(payload []byte, crc uint32) []byte {
	var rec []byte
	rec = protowire.AppendTag(rec, 1, protowire.VarintType)
	rec = protowire.AppendVarint(rec, etcdRecordEntry)
	rec = protowire.AppendTag(rec, 2, protowire.VarintType)
	rec = protowire.AppendVarint(rec, uint64(crc))
	rec = protowire.AppendTag(rec, 3, protowire.BytesType)
	rec = protowire.AppendBytes(rec, payload)
	pad := (8 - len(rec)%8) % 8
	length := uint64(len(rec))
	if pad > 0 {
		length |= uint64(0x80|pad) << 56
	}
	frame := make([]byte, etcdHeaderSize+len(rec)+pad)
	binary.LittleEndian.PutUint64(frame, length)
	copy(frame[etcdHeaderSize:], rec)
	return frame
}

// etcdDataEnd is the offset just past the last frame of an etcd segment:
// where its preallocated zeros begin.
func etcdDataEnd(data []byte) (int, error) {
	off := 0
	for off+etcdHeaderSize <= len(data) {
		l := binary.LittleEndian.Uint64(data[off:])
		if l == 0 {
			return off, nil
		}
		n := int64(l &^ (uint64(0xff) << 56))
		if int64(l) < 0 {
			n += int64(l>>56) & 7
		}
		if n > int64(len(data)-off-etcdHeaderSize) {
			return 0, fmt.Errorf("frame at %d runs %d bytes past the end", off, n)
		}
		off += etcdHeaderSize + int(n)
	}
	return off, nil
}

// tearEtcdTail writes, into the preallocated zeros after the last frame
// of an etcd segment, the sectors of a new frame up to a boundary inside
// it: the frame's later sectors stay zero.
func tearEtcdTail(path string, rng *rand.Rand) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	end, err := etcdDataEnd(data)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	// A frame that crosses the next sector boundary (entries of up to 3
	// sectors of data: a few tries at most).
	first := (end/sectorSize + 1) * sectorSize
	frame := etcdFrame(entryPayload(rng), rng.Uint32())
	for end+len(frame) <= first {
		frame = etcdFrame(entryPayload(rng), rng.Uint32())
	}
	// The sector boundaries inside the frame, past its first byte.
	var cuts []int
	for b := first; b < end+len(frame); b += sectorSize {
		cuts = append(cuts, b-end)
	}
	keep := cuts[rng.IntN(len(cuts))]
	// A segment etcd repaired before is cut at its last frame, no longer
	// preallocated: the write then extends it, to a sector boundary
	// inside the frame.
	if err := writeAt(path, frame[:keep], int64(end)); err != nil {
		return "", err
	}
	what := "its header"
	if keep > etcdHeaderSize {
		what = fmt.Sprintf("its first %d bytes", keep)
	} else if keep < etcdHeaderSize {
		what = fmt.Sprintf("%d of its %d header bytes", keep, etcdHeaderSize)
	}
	return fmt.Sprintf("wrote a %d-byte frame at offset %d of %s, of which %s (up to a sector boundary)", len(frame), end, filepath.Base(path), what), nil
}

// writeAt writes b at off in path and syncs it, as the crash left it on
// disk.
func writeAt(path string, b []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return errors.Join(err, f.Close())
	}
	if _, err := f.Write(b); err != nil {
		return errors.Join(fmt.Errorf("write %s at %d: %w", path, off, err), f.Close())
	}
	if err := f.Sync(); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}
