package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// recordType is the one-byte tag that says how a record's payload is encoded.
// Zero is deliberately invalid so that a zero-filled region never decodes as
// a record.
type recordType uint8

const (
	// recordMetadata carries Metadata (member ID, cluster ID) as two
	// little-endian uint64. Every segment starts with one.
	recordMetadata recordType = 1
	// recordEntry carries one raftpb.Entry.
	recordEntry recordType = 2
	// recordHardState carries one raftpb.HardState.
	recordHardState recordType = 3
	// recordSnapshot carries a raftpb.Snapshot with only Metadata.Index and
	// Metadata.Term set: a snapshot file of the local state machine at that
	// point is durable. It does not change the log.
	recordSnapshot recordType = 4
	// recordSnapshotInstall has the same payload as recordSnapshot, and also
	// says that raft replaced its whole log with that snapshot (a follower
	// receiving one from the leader): entries written before it are void.
	recordSnapshotInstall recordType = 5
)

// headerSize is the size of a record frame before its payload:
// length u32 | crc32c u32 | type u8, all little-endian.
const headerSize = 9

// metadataSize is the payload size of a recordMetadata.
const metadataSize = 16

// crcTable is the CRC-32C (Castagnoli) table, read-only after
// initialisation; Castagnoli has hardware support on amd64 and arm64.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks a record that cannot be decoded. Recovery treats it as the
// end of the intact prefix in the last segment and as fatal elsewhere.
var errCorrupt = errors.New("corrupt record")

// beginRecord appends a frame header for a payload of n bytes to buf and
// returns the extended buffer and the payload region for the caller to fill.
// finishRecord must be called once the payload is written.
func beginRecord(buf []byte, t recordType, n int) (out []byte, payload []byte) {
	start := len(buf)
	out = slices.Grow(buf, headerSize+n)[:start+headerSize+n]
	binary.LittleEndian.PutUint32(out[start:], uint32(n))
	out[start+8] = byte(t)
	return out, out[start+headerSize:]
}

// finishRecord computes the checksum of the record that starts at start and
// ends at len(buf). The CRC covers the type byte and the payload, so a record
// whose type was flipped is detected like one whose payload was.
func finishRecord(buf []byte, start int) {
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+8:], crcTable))
}

func appendEntry(buf []byte, e *raftpb.Entry) ([]byte, error) {
	start := len(buf)
	out, payload := beginRecord(buf, recordEntry, e.Size())
	if _, err := e.MarshalToSizedBuffer(payload); err != nil {
		return buf, fmt.Errorf("marshal entry %d: %w", e.Index, err)
	}
	finishRecord(out, start)
	return out, nil
}

// largeDataBytes is the Data size from which an entry's record is written
// in two pieces: its frame and encoding up to the Data from the encode
// buffer, then the Data itself from the entry (appendEntryHead). Copying
// a 1.5 MiB value into the buffer, and growing the buffer to hold a whole
// Ready of them, cost the member a third of its CPU under a flood of
// large puts; below this size one copy into the buffer is cheaper than
// another piece to write.
const largeDataBytes = 32 << 10

// appendEntryHead appends e's record without its Data: the frame header
// (its length and CRC already cover the Data) and the encoding of Term,
// Index, Type and the Data's tag and length. The record is complete once
// e.Data follows it in the file. The bytes are those appendEntry writes:
// raftpb.Entry encodes Data last.
func appendEntryHead(buf []byte, e *raftpb.Entry) []byte {
	start := len(buf)
	noData := raftpb.Entry{Term: e.Term, Index: e.Index, Type: e.Type}
	headLen := noData.Size()
	if e.Data != nil {
		headLen += 1 + uvarintLen(uint64(len(e.Data)))
	}
	out := slices.Grow(buf, headerSize+headLen)[:start+headerSize]
	binary.LittleEndian.PutUint32(out[start:], uint32(headLen+len(e.Data)))
	out[start+8] = byte(recordEntry)
	out = out[:start+headerSize+noData.Size()]
	// Marshalling an entry without Data into a sized buffer cannot fail.
	_, _ = noData.MarshalToSizedBuffer(out[start+headerSize:])
	if e.Data != nil {
		out = append(out, 0x22) // field 4 (Data), wire type 2 (bytes)
		out = binary.AppendUvarint(out, uint64(len(e.Data)))
	}
	crc := crc32.Checksum(out[start+8:], crcTable)
	binary.LittleEndian.PutUint32(out[start+4:], crc32.Update(crc, crcTable, e.Data))
	return out
}

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

func appendHardState(buf []byte, hs *raftpb.HardState) ([]byte, error) {
	start := len(buf)
	out, payload := beginRecord(buf, recordHardState, hs.Size())
	if _, err := hs.MarshalToSizedBuffer(payload); err != nil {
		return buf, fmt.Errorf("marshal hard state: %w", err)
	}
	finishRecord(out, start)
	return out, nil
}

func appendSnapshot(buf []byte, t recordType, s Snapshot) ([]byte, error) {
	marker := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: s.Index, Term: s.Term}}
	start := len(buf)
	out, payload := beginRecord(buf, t, marker.Size())
	if _, err := marker.MarshalToSizedBuffer(payload); err != nil {
		return buf, fmt.Errorf("marshal snapshot marker %d: %w", s.Index, err)
	}
	finishRecord(out, start)
	return out, nil
}

func appendMetadata(buf []byte, m Metadata) []byte {
	start := len(buf)
	out, payload := beginRecord(buf, recordMetadata, metadataSize)
	binary.LittleEndian.PutUint64(payload[0:], m.MemberID)
	binary.LittleEndian.PutUint64(payload[8:], m.ClusterID)
	finishRecord(out, start)
	return out
}

// record is one decoded record. Only the field matching typ is meaningful.
type record struct {
	typ       recordType
	offset    int64
	entry     raftpb.Entry
	hardState raftpb.HardState
	snapshot  Snapshot
	metadata  Metadata
}

// scanRecords decodes the records in data in order and passes each to fn.
// It returns the length of the intact prefix: the offset just past the last
// record that decoded. decodeErr (wrapping errCorrupt) describes the record
// at that offset when the data does not end cleanly there; an error returned
// by fn stops the scan and is returned as fnErr with the offset of the record
// it rejected as intact.
//
// scanRecords never panics and never allocates more than the payload it is
// decoding: a length field pointing past the end of data is a torn record,
// not an allocation request.
func scanRecords(data []byte, fn func(*record) error) (intact int, decodeErr, fnErr error) {
	var rec record
	off := 0
	for off < len(data) {
		if len(data)-off < headerSize {
			return off, fmt.Errorf("%w: torn header (%d of %d bytes)", errCorrupt, len(data)-off, headerSize), nil
		}
		n := binary.LittleEndian.Uint32(data[off:])
		crc := binary.LittleEndian.Uint32(data[off+4:])
		if uint64(n) > uint64(len(data)-off-headerSize) {
			return off, fmt.Errorf("%w: length %d runs past the end of the file", errCorrupt, n), nil
		}
		body := data[off+8 : off+headerSize+int(n)]
		if got := crc32.Checksum(body, crcTable); got != crc {
			return off, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", errCorrupt, crc, got), nil
		}
		rec = record{typ: recordType(body[0]), offset: int64(off)}
		if err := decodePayload(&rec, body[1:]); err != nil {
			return off, err, nil
		}
		if err := fn(&rec); err != nil {
			return off, nil, err
		}
		off += headerSize + int(n)
	}
	return off, nil, nil
}

// decodePayload fills rec from a payload whose checksum already matched.
func decodePayload(rec *record, payload []byte) error {
	switch rec.typ {
	case recordMetadata:
		if len(payload) != metadataSize {
			return fmt.Errorf("%w: metadata payload is %d bytes, want %d", errCorrupt, len(payload), metadataSize)
		}
		rec.metadata = Metadata{
			MemberID:  binary.LittleEndian.Uint64(payload[0:]),
			ClusterID: binary.LittleEndian.Uint64(payload[8:]),
		}
	case recordEntry:
		if err := rec.entry.Unmarshal(payload); err != nil {
			return fmt.Errorf("%w: entry: %w", errCorrupt, err)
		}
	case recordHardState:
		if err := rec.hardState.Unmarshal(payload); err != nil {
			return fmt.Errorf("%w: hard state: %w", errCorrupt, err)
		}
	case recordSnapshot, recordSnapshotInstall:
		var marker raftpb.Snapshot
		if err := marker.Unmarshal(payload); err != nil {
			return fmt.Errorf("%w: snapshot marker: %w", errCorrupt, err)
		}
		rec.snapshot = Snapshot{Index: marker.Metadata.Index, Term: marker.Metadata.Term}
	default:
		return fmt.Errorf("%w: unknown record type %d", errCorrupt, rec.typ)
	}
	return nil
}
