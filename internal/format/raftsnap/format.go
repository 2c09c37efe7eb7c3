package raftsnap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"go.etcd.io/raft/v3/raftpb"
)

// magic opens every snapshot file: format name and version. A reader that
// finds anything else refuses the file instead of guessing.
const magic = "MSSNAP\x00\x01"

const (
	prefixSize  = len(magic) + 4 // magic | header length u32
	trailerSize = 8 + 4          // image length u64 | crc32c u32
	// maxHeaderSize bounds the metadata header. A ConfState lists member
	// IDs; a million members would still fit.
	maxHeaderSize = 64 << 20
)

// crcTable is the CRC-32C table, read-only after initialisation.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt marks a snapshot file that failed validation.
var ErrCorrupt = errors.New("snapshot file is corrupt")

// layout is where the parts of a validated snapshot file are.
type layout struct {
	meta        raftpb.SnapshotMetadata
	imageOffset int64
	imageLen    int64
	// prefixCRC is the CRC-32C of everything before the image, the starting
	// point for re-verifying the image while it streams.
	prefixCRC uint32
	storedCRC uint32
}

// decode validates a whole snapshot file of the given size: magic, header,
// image length and checksum. It reads the image once to checksum it but
// keeps none of it in memory, and never panics or allocates more than the
// header on any input.
func decode(r io.ReaderAt, size int64) (layout, error) {
	var l layout
	if size < int64(prefixSize+trailerSize) {
		return l, fmt.Errorf("%w: %d bytes is shorter than the fixed framing", ErrCorrupt, size)
	}
	prefix := make([]byte, prefixSize)
	if _, err := r.ReadAt(prefix, 0); err != nil {
		return l, fmt.Errorf("read prefix: %w", err)
	}
	if string(prefix[:len(magic)]) != magic {
		return l, fmt.Errorf("%w: bad magic %q", ErrCorrupt, prefix[:len(magic)])
	}
	hdrLen := int64(binary.LittleEndian.Uint32(prefix[len(magic):]))
	if hdrLen > maxHeaderSize || hdrLen > size-int64(prefixSize+trailerSize) {
		return l, fmt.Errorf("%w: header length %d does not fit in %d bytes", ErrCorrupt, hdrLen, size)
	}
	header := make([]byte, hdrLen)
	if _, err := r.ReadAt(header, int64(prefixSize)); err != nil {
		return l, fmt.Errorf("read header: %w", err)
	}
	trailer := make([]byte, trailerSize)
	if _, err := r.ReadAt(trailer, size-trailerSize); err != nil {
		return l, fmt.Errorf("read trailer: %w", err)
	}
	l.imageOffset = int64(prefixSize) + hdrLen
	l.imageLen = size - trailerSize - l.imageOffset
	if got := binary.LittleEndian.Uint64(trailer); got != uint64(l.imageLen) {
		return l, fmt.Errorf("%w: trailer says %d image bytes, file holds %d", ErrCorrupt, got, l.imageLen)
	}
	l.storedCRC = binary.LittleEndian.Uint32(trailer[8:])
	l.prefixCRC = crc32.Update(crc32.Update(0, crcTable, prefix), crcTable, header)
	crc, err := crcOfSection(r, l.prefixCRC, l.imageOffset, l.imageLen)
	if err != nil {
		return l, err
	}
	crc = crc32.Update(crc, crcTable, trailer[:8])
	if crc != l.storedCRC {
		return l, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, l.storedCRC, crc)
	}
	// Only a checksummed header is trusted enough to unmarshal.
	if err := l.meta.Unmarshal(header); err != nil {
		return l, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	return l, nil
}

func crcOfSection(r io.ReaderAt, crc uint32, off, n int64) (uint32, error) {
	buf := make([]byte, min(n, 256<<10))
	for n > 0 {
		chunk := buf[:min(n, int64(len(buf)))]
		if _, err := r.ReadAt(chunk, off); err != nil {
			return 0, fmt.Errorf("read image at %d: %w", off, err)
		}
		crc = crc32.Update(crc, crcTable, chunk)
		off += int64(len(chunk))
		n -= int64(len(chunk))
	}
	return crc, nil
}

// encodePrefix returns magic, header length and header for meta.
func encodePrefix(meta *raftpb.SnapshotMetadata) ([]byte, error) {
	buf := make([]byte, prefixSize+meta.Size())
	copy(buf, magic)
	binary.LittleEndian.PutUint32(buf[len(magic):], uint32(meta.Size()))
	if _, err := meta.MarshalToSizedBuffer(buf[prefixSize:]); err != nil {
		return nil, fmt.Errorf("marshal snapshot metadata: %w", err)
	}
	return buf, nil
}

// crcWriter forwards writes and keeps a running CRC-32C and byte count of
// everything written through it.
type crcWriter struct {
	w   io.Writer
	crc uint32
	n   int64
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, crcTable, p[:n])
	c.n += int64(n)
	return n, err
}

// verifyingReader streams the image and checks the file checksum when it
// reaches the image's end, returning ErrCorrupt instead of io.EOF if the
// bytes changed since validation.
type verifyingReader struct {
	r       io.Reader
	crc     uint32
	left    int64
	trailer [8]byte
	want    uint32
	path    string
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.left == 0 {
		crc := crc32.Update(v.crc, crcTable, v.trailer[:])
		if crc != v.want {
			return 0, fmt.Errorf("%s: %w: image changed after validation", v.path, ErrCorrupt)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > v.left {
		p = p[:v.left]
	}
	n, err := v.r.Read(p)
	v.crc = crc32.Update(v.crc, crcTable, p[:n])
	v.left -= int64(n)
	if err == io.EOF {
		if v.left > 0 {
			return n, fmt.Errorf("%s: %w: image ends early", v.path, ErrCorrupt)
		}
		err = nil
	}
	return n, err
}
