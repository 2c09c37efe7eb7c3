package etcddir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/metastore-io/metastore/internal/host/fileutil"
)

// etcd's WAL record types (server/storage/wal/wal.go).
const (
	recMetadata int64 = 1
	recEntry    int64 = 2
	recState    int64 = 3
	recCRC      int64 = 4
	recSnapshot int64 = 5
)

const (
	frameBytes  = 8   // the little-endian length field before each record
	sectorBytes = 512 // a torn write zeroes whole sectors
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error about the content of an etcd WAL.
var ErrCorrupt = errors.New("not a valid etcd WAL")

// errTorn marks a record cut short by a crash: acceptable at the end of
// the last segment only.
var errTorn = errors.New("torn record")

// Snapshot is one of the WAL's snapshot records (walpb.Snapshot).
type Snapshot struct {
	Index, Term uint64
	ConfState   *raftpb.ConfState // nil before etcd 3.5
}

// Log is what an etcd WAL holds from a given index on.
type Log struct {
	MemberID, ClusterID uint64
	HardState           raftpb.HardState
	Snapshots           []Snapshot
	// Entries are the entries after the index ReadWAL was given, in
	// order, with later writes of an index replacing earlier ones (a
	// new leader truncating uncommitted entries), as etcd's ReadAll.
	Entries []raftpb.Entry
	// TermAt is the term of the entry at the index ReadWAL was given,
	// 0 if the segments read do not hold it.
	TermAt uint64
	// TornAt is set when the last segment ended in a torn record (a
	// crash in mid-write): the file and offset where reading stopped.
	TornAt string
}

// segment is one WAL file.
type segment struct {
	name       string
	seq, index uint64
}

// listSegments returns the *.wal files of dir in sequence order; other
// names (etcd's preallocated .tmp files) are not segments.
func listSegments(dir string) ([]segment, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read etcd WAL dir: %w", err)
	}
	var segs []segment
	for _, de := range des {
		seq, index, ok := fileutil.ParseHexPairName(de.Name(), ".wal")
		if ok && de.Type().IsRegular() {
			segs = append(segs, segment{name: de.Name(), seq: seq, index: index})
		}
	}
	slices.SortFunc(segs, func(a, b segment) int { return cmpUint(a.seq, b.seq) })
	return segs, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// IsWAL reports whether dir holds a WAL in etcd's format: its first
// segment starts with the crc record etcd writes first in every file.
// A MetaStore log (package wal) never does. A missing dir or one without
// segments holds none.
func IsWAL(dir string) (bool, error) {
	segs, err := listSegments(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(segs) == 0) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f, err := os.Open(filepath.Join(dir, segs[0].name))
	if err != nil {
		return false, fmt.Errorf("open WAL segment: %w", err)
	}
	defer f.Close()
	head := make([]byte, 64)
	n, _ := f.Read(head)
	r := &reader{}
	typ, _, _, err := r.next(head[:n], 0, true)
	return err == nil && typ == recCRC, nil
}

// ReadWAL reads the etcd WAL in dir from the segment holding index on,
// as etcd does when it restarts from a snapshot at index: the member and
// cluster IDs, the last hard state, the snapshot records and the entries
// after index. Crc chaining is checked across segments; a torn record at
// the end of the last segment ends the log there (etcd repairs it the
// same way), any other damage is refused.
func ReadWAL(dir string, index uint64) (*Log, error) {
	segs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	first := -1
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i].index <= index {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, fmt.Errorf("%w: no segment in %s reaches back to index %d", ErrCorrupt, dir, index)
	}
	segs = segs[first:]
	for i := 1; i < len(segs); i++ {
		if segs[i].seq != segs[i-1].seq+1 {
			return nil, fmt.Errorf("%w: segment %s does not follow %s", ErrCorrupt, segs[i].name, segs[i-1].name)
		}
	}
	data := make([][]byte, len(segs))
	names := make([]string, len(segs))
	for i, s := range segs {
		names[i] = s.name
		if data[i], err = os.ReadFile(filepath.Join(dir, s.name)); err != nil {
			return nil, fmt.Errorf("read WAL segment: %w", err)
		}
	}
	return decodeLog(names, data, index)
}

// decodeLog decodes the records of consecutive segments.
func decodeLog(names []string, segs [][]byte, index uint64) (*Log, error) {
	r := &reader{log: &Log{}, after: index}
	var metadata []byte
	for i, data := range segs {
		last := i == len(segs)-1
		for off := 0; ; {
			typ, payload, n, err := r.next(data, off, last)
			if errors.Is(err, errTorn) && last {
				r.log.TornAt = fmt.Sprintf("%s at offset %d", names[i], off)
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%w: %s at offset %d: %w", ErrCorrupt, names[i], off, err)
			}
			if n == 0 {
				break // end of the file's records
			}
			off += n
			if typ == recMetadata {
				if metadata != nil && string(metadata) != string(payload) {
					return nil, fmt.Errorf("%w: %s at offset %d: conflicting metadata", ErrCorrupt, names[i], off)
				}
				metadata = payload
			}
			if err := r.apply(typ, payload); err != nil {
				return nil, fmt.Errorf("%w: %s at offset %d: %w", ErrCorrupt, names[i], off, err)
			}
		}
	}
	if metadata == nil {
		return nil, fmt.Errorf("%w: no metadata record", ErrCorrupt)
	}
	var md pb.Metadata
	if err := md.Unmarshal(metadata); err != nil {
		return nil, fmt.Errorf("%w: metadata: %w", ErrCorrupt, err)
	}
	r.log.MemberID, r.log.ClusterID = md.NodeID, md.ClusterID
	return r.log, nil
}

// reader decodes records and keeps the running crc.
type reader struct {
	log   *Log
	after uint64
	crc   uint32
}

// next decodes the record at off: its type and data, and how many bytes
// it took (0 at the end of the file's records: its end, or the zeros of
// preallocated space). The data's crc is checked and chained.
func (r *reader) next(data []byte, off int, last bool) (typ int64, payload []byte, n int, err error) {
	if len(data)-off < frameBytes {
		if allZero(data[off:]) {
			return 0, nil, 0, nil
		}
		return 0, nil, 0, errTorn
	}
	lenField := binary.LittleEndian.Uint64(data[off:])
	if lenField == 0 {
		return 0, nil, 0, nil
	}
	size := lenField &^ (0xff << 56)
	pad := uint64(0)
	if lenField&(1<<63) != 0 {
		pad = (lenField >> 56) & 0x7
	}
	rest := uint64(len(data) - off - frameBytes)
	if size > rest || pad > rest-size {
		return 0, nil, 0, fmt.Errorf("%w: record of %d bytes past the end of the file", errTorn, size)
	}
	body := data[off+frameBytes : off+frameBytes+int(size)]
	typ, crc, payload, err := decodeRecord(body)
	if err != nil {
		if last && isTorn(data, off+frameBytes, int(size+pad)) {
			return 0, nil, 0, errTorn
		}
		return 0, nil, 0, err
	}
	if typ != recCRC {
		sum := crc32.Update(r.crc, castagnoli, payload)
		if sum != crc {
			if last && isTorn(data, off+frameBytes, int(size+pad)) {
				return 0, nil, 0, errTorn
			}
			return 0, nil, 0, fmt.Errorf("crc mismatch: record says %x, data sums to %x", crc, sum)
		}
		r.crc = sum
	} else {
		// Each segment starts with the crc the previous one ended with;
		// the first one read has nothing to match.
		if r.crc != 0 && crc != r.crc {
			return 0, nil, 0, fmt.Errorf("crc record %x does not continue the log's %x", crc, r.crc)
		}
		r.crc = crc
	}
	return typ, payload, frameBytes + int(size+pad), nil
}

// isTorn is etcd's test for a torn write: some sector-aligned piece of
// the record is all zeros.
func isTorn(data []byte, start, size int) bool {
	for off := start; off < start+size; {
		end := min(start+size, (off/sectorBytes+1)*sectorBytes)
		if allZero(data[off:end]) {
			return true
		}
		off = end
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeRecord decodes a walpb.Record: type (1, varint), crc (2,
// varint), data (3, bytes).
func decodeRecord(b []byte) (typ int64, crc uint32, data []byte, err error) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, nil, fmt.Errorf("record: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == 1 && wt == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, 0, nil, fmt.Errorf("record type: %w", protowire.ParseError(n))
			}
			typ, b = int64(v), b[n:]
		case num == 2 && wt == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, 0, nil, fmt.Errorf("record crc: %w", protowire.ParseError(n))
			}
			crc, b = uint32(v), b[n:]
		case num == 3 && wt == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, 0, nil, fmt.Errorf("record data: %w", protowire.ParseError(n))
			}
			data, b = v, b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, wt, b)
			if n < 0 {
				return 0, 0, nil, fmt.Errorf("record field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	if typ < recMetadata || typ > recSnapshot {
		return 0, 0, nil, fmt.Errorf("unknown record type %d", typ)
	}
	return typ, crc, data, nil
}

// apply adds a decoded record to the log.
func (r *reader) apply(typ int64, payload []byte) error {
	l := r.log
	switch typ {
	case recEntry:
		var e raftpb.Entry
		if err := e.Unmarshal(payload); err != nil {
			return fmt.Errorf("entry: %w", err)
		}
		if e.Index == r.after {
			l.TermAt = e.Term
		}
		if e.Index <= r.after {
			return nil
		}
		offset := e.Index - r.after - 1
		if offset > uint64(len(l.Entries)) {
			return fmt.Errorf("entry %d leaves a gap after %d entries from %d", e.Index, len(l.Entries), r.after+1)
		}
		l.Entries = append(l.Entries[:offset], e)
	case recState:
		var hs raftpb.HardState
		if err := hs.Unmarshal(payload); err != nil {
			return fmt.Errorf("hard state: %w", err)
		}
		l.HardState = hs
	case recSnapshot:
		s, err := decodeSnapshot(payload)
		if err != nil {
			return err
		}
		if s.Index == r.after && s.Term != 0 {
			l.TermAt = s.Term
		}
		l.Snapshots = append(l.Snapshots, s)
	}
	return nil
}

// decodeSnapshot decodes a walpb.Snapshot: index (1), term (2),
// conf_state (3, raftpb.ConfState).
func decodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, fmt.Errorf("snapshot record: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 2) && wt == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return s, fmt.Errorf("snapshot record: %w", protowire.ParseError(n))
			}
			if num == 1 {
				s.Index = v
			} else {
				s.Term = v
			}
			b = b[n:]
		case num == 3 && wt == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return s, fmt.Errorf("snapshot record: %w", protowire.ParseError(n))
			}
			s.ConfState = &raftpb.ConfState{}
			if err := s.ConfState.Unmarshal(v); err != nil {
				return s, fmt.Errorf("snapshot record conf state: %w", err)
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, wt, b)
			if n < 0 {
				return s, fmt.Errorf("snapshot record field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return s, nil
}
