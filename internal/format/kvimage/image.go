package kvimage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

const (
	// MagicLen is the length of Format.Magic.
	MagicLen = 8

	tagRecord = 0x01
	tagEnd    = 0x02
	// maxFieldLen bounds one key or value.
	maxFieldLen = 1 << 30
	// readChunk is how far ahead of the received bytes a field buffer may
	// grow, so that a corrupt length costs at most this much memory
	// before the stream runs out.
	readChunk = 1 << 20
)

// Format names one engine's images.
type Format struct {
	// Name says what the image is in error messages, e.g. "RocksDB
	// backend image".
	Name string
	// Magic is exactly MagicLen bytes.
	Magic   string
	Version uint16
}

// ErrCorrupt is wrapped by every error that comes from the content of an
// image (as opposed to the reader or writer failing).
var ErrCorrupt = errors.New("corrupt key/value image")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encoder writes an image, hashing as it goes. The first error sticks:
// every later call returns it.
type Encoder struct {
	out   countingWriter
	w     *bufio.Writer
	crc   uint32
	count uint64
	buf   [1 + 2*binary.MaxVarintLen64]byte
	err   error
}

// NewEncoder starts an image of format f on w.
func NewEncoder(w io.Writer, f Format) *Encoder {
	if len(f.Magic) != MagicLen {
		panic(fmt.Sprintf("kvimage: magic %q is not %d bytes", f.Magic, MagicLen))
	}
	e := &Encoder{out: countingWriter{w: w}}
	e.w = bufio.NewWriterSize(&e.out, 64<<10)
	var header [MagicLen + 2]byte
	copy(header[:], f.Magic)
	binary.BigEndian.PutUint16(header[MagicLen:], f.Version)
	e.write(header[:])
	return e
}

func (e *Encoder) write(p []byte) {
	if e.err != nil {
		return
	}
	e.crc = crc32.Update(e.crc, castagnoli, p)
	_, e.err = e.w.Write(p)
}

// Record appends one key/value. Keys must come in strictly ascending
// order (an iterator over one consistent view guarantees it); Decode
// refuses anything else.
func (e *Encoder) Record(key, value []byte) error {
	e.buf[0] = tagRecord
	n := 1 + binary.PutUvarint(e.buf[1:], uint64(len(key)))
	e.write(e.buf[:n])
	e.write(key)
	n = binary.PutUvarint(e.buf[:], uint64(len(value)))
	e.write(e.buf[:n])
	e.write(value)
	e.count++
	return e.err
}

// Finish writes the trailer and flushes.
func (e *Encoder) Finish() error {
	var trailer [1 + 8 + 4]byte
	trailer[0] = tagEnd
	binary.BigEndian.PutUint64(trailer[1:], e.count)
	e.write(trailer[:9])
	binary.BigEndian.PutUint32(trailer[9:], e.crc)
	if e.err == nil {
		_, e.err = e.w.Write(trailer[9:])
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.err
}

// Written is the number of bytes that reached the underlying writer.
func (e *Encoder) Written() int64 { return e.out.n }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// decoder reads an image, hashing every byte it consumes.
type decoder struct {
	f       Format
	r       *bufio.Reader
	crc     uint32
	one     [1]byte
	key     []byte
	value   []byte
	prevKey []byte
	hasPrev bool // prevKey is set (it may be the empty key)
}

// Decode reads a whole image of format f from r, calling sink for every
// record in order, and returns the number of records. The slices passed
// to sink are reused after it returns. An error from sink ends decoding
// and is returned as it is. The CRC is checked only at the end, so sink
// must not do anything irreversible: a nil error from Decode is what says
// the records were genuine.
func Decode(r io.Reader, f Format, sink func(key, value []byte) error) (uint64, error) {
	d := &decoder{f: f, r: bufio.NewReaderSize(r, 64<<10)}
	if err := d.header(); err != nil {
		return 0, err
	}
	var count uint64
	for {
		tag, err := d.ReadByte()
		if err != nil {
			return count, d.truncated("record tag", err)
		}
		switch tag {
		case tagRecord:
			if err := d.record(); err != nil {
				return count, fmt.Errorf("record %d: %w", count, err)
			}
			if err := sink(d.key, d.value); err != nil {
				return count, err
			}
			count++
		case tagEnd:
			return count, d.trailer(count)
		default:
			return count, d.corrupt("record %d: unknown tag %#x", count, tag)
		}
	}
}

func (d *decoder) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCorrupt, d.f.Name, fmt.Sprintf(format, args...))
}

func (d *decoder) header() error {
	var header [MagicLen + 2]byte
	if _, err := io.ReadFull(d.r, header[:]); err != nil {
		return d.truncated("header", err)
	}
	d.crc = crc32.Update(0, castagnoli, header[:])
	if string(header[:MagicLen]) != d.f.Magic {
		return d.corrupt("not an image of this kind (magic %q, want %q)", header[:MagicLen], d.f.Magic)
	}
	if v := binary.BigEndian.Uint16(header[MagicLen:]); v != d.f.Version {
		return d.corrupt("version %d, this build reads version %d", v, d.f.Version)
	}
	return nil
}

func (d *decoder) record() error {
	var err error
	if d.key, err = d.field(d.key, "key"); err != nil {
		return err
	}
	// Strict order is also what ordered stores built from the records
	// (a B-tree, RocksDB's SST writer, which asserts) rely on.
	if d.hasPrev && bytes.Compare(d.key, d.prevKey) <= 0 {
		return d.corrupt("key %q does not follow %q", d.key, d.prevKey)
	}
	d.prevKey = append(d.prevKey[:0], d.key...)
	d.hasPrev = true
	if d.value, err = d.field(d.value, "value"); err != nil {
		return err
	}
	return nil
}

// field reads a uvarint length and that many bytes into buf.
func (d *decoder) field(buf []byte, what string) ([]byte, error) {
	n, err := d.uvarint(what)
	if err != nil {
		return buf, err
	}
	if n > maxFieldLen {
		return buf, d.corrupt("%s length %d exceeds %d", what, n, maxFieldLen)
	}
	buf = buf[:0]
	for remaining := int(n); remaining > 0; {
		chunk := min(remaining, readChunk)
		start := len(buf)
		buf = slices.Grow(buf, chunk)[:start+chunk]
		if _, err := io.ReadFull(d.r, buf[start:]); err != nil {
			return buf, d.truncated(what, err)
		}
		remaining -= chunk
	}
	d.crc = crc32.Update(d.crc, castagnoli, buf)
	if buf == nil {
		buf = []byte{} // an empty value is still a value
	}
	return buf, nil
}

func (d *decoder) trailer(count uint64) error {
	var trailer [8 + 4]byte
	if _, err := io.ReadFull(d.r, trailer[:]); err != nil {
		return d.truncated("trailer", err)
	}
	d.crc = crc32.Update(d.crc, castagnoli, trailer[:8])
	if want := binary.BigEndian.Uint32(trailer[8:]); want != d.crc {
		return d.corrupt("checksum mismatch (stored %#08x, computed %#08x)", want, d.crc)
	}
	if stored := binary.BigEndian.Uint64(trailer[:8]); stored != count {
		return d.corrupt("trailer counts %d records, image holds %d", stored, count)
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		if err != nil {
			return fmt.Errorf("read after %s trailer: %w", d.f.Name, err)
		}
		return d.corrupt("data after the trailer")
	}
	return nil
}

// uvarint reads one unsigned varint (encoding/binary's format), refusing
// padded encodings, which would give one image several byte forms.
func (d *decoder) uvarint(what string) (uint64, error) {
	var x uint64
	for i := range binary.MaxVarintLen64 {
		b, err := d.ReadByte()
		if err != nil {
			return 0, d.truncated(what+" length", err)
		}
		if i == binary.MaxVarintLen64-1 && b > 1 {
			break
		}
		if b == 0 && i > 0 {
			return 0, d.corrupt("%s length is not minimally encoded", what)
		}
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, d.corrupt("%s length overflows 64 bits", what)
}

// ReadByte consumes and hashes one byte.
func (d *decoder) ReadByte() (byte, error) {
	b, err := d.r.ReadByte()
	if err != nil {
		return 0, err
	}
	d.one[0] = b
	d.crc = crc32.Update(d.crc, castagnoli, d.one[:])
	return b, nil
}

// truncated turns an early end of stream into ErrCorrupt and passes
// genuine read errors through.
func (d *decoder) truncated(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return d.corrupt("truncated in %s", what)
	}
	return fmt.Errorf("read %s %s: %w", d.f.Name, what, err)
}
