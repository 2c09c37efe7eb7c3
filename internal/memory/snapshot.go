package memory

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/google/btree"
)

// Snapshot format (version 1), written by ReadView.WriteTo and read by
// Backend.Restore:
//
//	magic    8 bytes  "MSMEMSNP"
//	version  4 bytes  big-endian, 1
//	records, in strictly ascending key order, each:
//	  0x01
//	  uvarint  len(key)
//	  uvarint  len(value)
//	  key, value
//	end marker 0x00
//	count    8 bytes  big-endian number of records
//	crc      4 bytes  big-endian CRC-32C (Castagnoli) of every byte above
//
// For example the image {"a": "xy"} is
//
//	4d534d454d534e50 00000001 01 01 02 61 7879 00 0000000000000001 <crc>
//
// Restore accepts nothing else: a wrong magic or version, a record out of
// order, a count or checksum mismatch, a truncated stream or bytes after
// the checksum are all errors.

const (
	snapshotMagic   = "MSMEMSNP"
	snapshotVersion = 1
	tagRecord       = 0x01
	tagEnd          = 0x00
	// maxFieldLen bounds one key or value; larger lengths are corruption.
	maxFieldLen = 1 << 31
	// eagerAllocLimit is the largest record buffer allocated up front;
	// longer ones grow as bytes actually arrive, so a corrupt length
	// cannot make Restore allocate gigabytes before failing.
	eagerAllocLimit = 1 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptSnapshot wraps every format error Restore reports.
var ErrCorruptSnapshot = errors.New("corrupt memory snapshot")

func writeSnapshot(w io.Writer, tree *btree.BTreeG[item]) (int64, error) {
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	crc := crc32.New(crcTable)
	out := io.MultiWriter(bw, crc)

	var hdr [12]byte
	copy(hdr[:8], snapshotMagic)
	binary.BigEndian.PutUint32(hdr[8:], snapshotVersion)
	if _, err := out.Write(hdr[:]); err != nil {
		return cw.n, fmt.Errorf("write snapshot header: %w", err)
	}
	var (
		count uint64
		err   error
		rec   = make([]byte, 0, 1+2*binary.MaxVarintLen64)
	)
	tree.Ascend(func(it item) bool {
		rec = append(rec[:0], tagRecord)
		rec = binary.AppendUvarint(rec, uint64(len(it.key)))
		rec = binary.AppendUvarint(rec, uint64(len(it.value)))
		if _, err = out.Write(rec); err != nil {
			return false
		}
		if _, err = out.Write(it.key); err != nil {
			return false
		}
		if _, err = out.Write(it.value); err != nil {
			return false
		}
		count++
		return true
	})
	if err != nil {
		return cw.n, fmt.Errorf("write snapshot record: %w", err)
	}
	var tail [9]byte
	tail[0] = tagEnd
	binary.BigEndian.PutUint64(tail[1:], count)
	if _, err := out.Write(tail[:]); err != nil {
		return cw.n, fmt.Errorf("write snapshot trailer: %w", err)
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc.Sum32())
	if _, err := bw.Write(sum[:]); err != nil {
		return cw.n, fmt.Errorf("write snapshot checksum: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("flush snapshot: %w", err)
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// snapshotReader reads a snapshot while checksumming what it consumed.
type snapshotReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	one [1]byte
}

func (s *snapshotReader) ReadByte() (byte, error) {
	b, err := s.r.ReadByte()
	if err != nil {
		if err == io.EOF {
			return 0, err
		}
		return 0, &readError{err: err}
	}
	s.one[0] = b
	s.crc.Write(s.one[:])
	return b, nil
}

func (s *snapshotReader) readFull(p []byte) error {
	if _, err := io.ReadFull(s.r, p); err != nil {
		return err
	}
	s.crc.Write(p)
	return nil
}

// readN reads n bytes, allocating as they arrive for large n.
func (s *snapshotReader) readN(n uint64) ([]byte, error) {
	if n <= eagerAllocLimit {
		p := make([]byte, n)
		return p, s.readFull(p)
	}
	var buf bytes.Buffer
	got, err := io.Copy(&buf, io.LimitReader(s.r, int64(n)))
	if err != nil {
		return nil, err
	}
	if uint64(got) != n {
		return nil, io.ErrUnexpectedEOF
	}
	s.crc.Write(buf.Bytes())
	return buf.Bytes(), nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
}

func truncated(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corrupt("truncated in %s", what)
	}
	return fmt.Errorf("read snapshot %s: %w", what, err)
}

// badVarint classifies a binary.ReadUvarint failure: the stream ended, the
// reader failed, or the bytes are not a valid varint.
func badVarint(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return truncated(what, err)
	}
	var rerr *readError
	if errors.As(err, &rerr) {
		return fmt.Errorf("read snapshot %s: %w", what, rerr.err)
	}
	return corrupt("%s: %v", what, err)
}

// readError marks an error of the underlying reader (as opposed to a
// format error), so that it is reported as such.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// readSnapshot parses and verifies a whole snapshot into a new tree.
func readSnapshot(r io.Reader) (*btree.BTreeG[item], int64, error) {
	s := &snapshotReader{r: bufio.NewReaderSize(r, 64<<10), crc: crc32.New(crcTable)}
	var hdr [12]byte
	if err := s.readFull(hdr[:]); err != nil {
		return nil, 0, truncated("header", err)
	}
	if string(hdr[:8]) != snapshotMagic {
		return nil, 0, corrupt("bad magic %q", hdr[:8])
	}
	if v := binary.BigEndian.Uint32(hdr[8:]); v != snapshotVersion {
		return nil, 0, corrupt("unsupported version %d", v)
	}
	tree := btree.NewG(treeDegree, lessItem)
	var (
		size    int64
		count   uint64
		lastKey []byte
	)
	for {
		tag, err := s.ReadByte()
		if err != nil {
			return nil, 0, truncated("record tag", err)
		}
		if tag == tagEnd {
			break
		}
		if tag != tagRecord {
			return nil, 0, corrupt("bad record tag %#x after %d records", tag, count)
		}
		klen, err := binary.ReadUvarint(s)
		if err != nil {
			return nil, 0, badVarint("key length", err)
		}
		vlen, err := binary.ReadUvarint(s)
		if err != nil {
			return nil, 0, badVarint("value length", err)
		}
		if klen > maxFieldLen || vlen > maxFieldLen {
			return nil, 0, corrupt("record %d: lengths %d/%d too large", count, klen, vlen)
		}
		buf, err := s.readN(klen + vlen)
		if err != nil {
			return nil, 0, truncated("record", err)
		}
		it := item{key: buf[:klen:klen], value: buf[klen:]}
		if count > 0 && bytes.Compare(lastKey, it.key) >= 0 {
			return nil, 0, corrupt("record %d: key %q not above %q", count, it.key, lastKey)
		}
		tree.ReplaceOrInsert(it)
		size += int64(len(buf))
		lastKey = it.key
		count++
	}
	var countBuf [8]byte
	if err := s.readFull(countBuf[:]); err != nil {
		return nil, 0, truncated("record count", err)
	}
	if c := binary.BigEndian.Uint64(countBuf[:]); c != count {
		return nil, 0, corrupt("record count %d, read %d", c, count)
	}
	want := s.crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(s.r, sum[:]); err != nil {
		return nil, 0, truncated("checksum", err)
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return nil, 0, corrupt("checksum %08x, computed %08x", got, want)
	}
	if _, err := s.r.ReadByte(); err != io.EOF {
		if err != nil {
			return nil, 0, fmt.Errorf("read snapshot end: %w", err)
		}
		return nil, 0, corrupt("data after the checksum")
	}
	return tree, size, nil
}
