package rocksdb

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

// The image format of ReadView.WriteTo and Backend.Restore (doc.go has a
// worked example):
//
//	magic   8 bytes  "MSROCKS\x00"
//	version 2 bytes  big endian, imageVersion
//	records          in strictly ascending key order, each
//	                   tagRecord, uvarint len(key), key, uvarint len(value), value
//	trailer          tagEnd, 8-byte big-endian record count,
//	                 4-byte big-endian CRC32C (Castagnoli) of every byte
//	                 before it, from the magic to the count inclusive
//	then end of stream.
const (
	imageMagic   = "MSROCKS\x00"
	imageVersion = 1
	tagRecord    = 0x01
	tagEnd       = 0x02
	// maxFieldLen bounds one key or value. Lengths are read from the
	// stream, so the decoder also grows its buffers by readChunk as bytes
	// actually arrive: a corrupt length costs at most one chunk of memory
	// before the stream runs out.
	maxFieldLen = 1 << 30
	readChunk   = 1 << 20
)

// ErrBadImage is wrapped by every error that comes from the content of an
// image (as opposed to the reader failing).
var ErrBadImage = errors.New("rocksdb: invalid image")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// imageEncoder writes an image, hashing as it goes.
type imageEncoder struct {
	out   countingWriter
	w     *bufio.Writer
	crc   uint32
	count uint64
	buf   [1 + 2*binary.MaxVarintLen64]byte
	err   error
}

func newImageEncoder(w io.Writer) *imageEncoder {
	e := &imageEncoder{out: countingWriter{w: w}}
	e.w = bufio.NewWriterSize(&e.out, 64<<10)
	var header [len(imageMagic) + 2]byte
	copy(header[:], imageMagic)
	binary.BigEndian.PutUint16(header[len(imageMagic):], imageVersion)
	e.write(header[:])
	return e
}

func (e *imageEncoder) write(p []byte) {
	if e.err != nil {
		return
	}
	e.crc = crc32.Update(e.crc, castagnoli, p)
	_, e.err = e.w.Write(p)
}

// record appends one key/value; keys must come in strictly ascending
// order, which an iterator over one snapshot guarantees.
func (e *imageEncoder) record(key, value []byte) error {
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

// finish writes the trailer and flushes.
func (e *imageEncoder) finish() error {
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

// written is the number of bytes that reached the underlying writer.
func (e *imageEncoder) written() int64 { return e.out.n }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// imageDecoder reads an image, hashing every byte it consumes.
type imageDecoder struct {
	r       *bufio.Reader
	crc     uint32
	one     [1]byte
	key     []byte
	value   []byte
	prevKey []byte
	hasPrev bool // prevKey is set (it may be the empty key)
}

// decodeImage reads a whole image from r, calling sink for every record
// in order, and returns the number of records. The slices passed to sink
// are reused after it returns. The CRC can only be checked at the end, so
// sink must not do anything irreversible: a nil error from decodeImage is
// what says the records were genuine.
func decodeImage(r io.Reader, sink func(key, value []byte) error) (uint64, error) {
	d := &imageDecoder{r: bufio.NewReaderSize(r, 64<<10)}
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
			return count, fmt.Errorf("%w: record %d: unknown tag %#x", ErrBadImage, count, tag)
		}
	}
}

func (d *imageDecoder) header() error {
	var header [len(imageMagic) + 2]byte
	if _, err := io.ReadFull(d.r, header[:]); err != nil {
		return d.truncated("header", err)
	}
	d.crc = crc32.Update(0, castagnoli, header[:])
	if string(header[:len(imageMagic)]) != imageMagic {
		return fmt.Errorf("%w: not a RocksDB backend image (magic %q)", ErrBadImage, header[:len(imageMagic)])
	}
	if v := binary.BigEndian.Uint16(header[len(imageMagic):]); v != imageVersion {
		return fmt.Errorf("%w: version %d, this build reads version %d", ErrBadImage, v, imageVersion)
	}
	return nil
}

func (d *imageDecoder) record() error {
	var err error
	if d.key, err = d.field(d.key, "key"); err != nil {
		return err
	}
	// Strict order is also what RocksDB's SST writer requires (and it
	// asserts on it rather than returning an error).
	if d.hasPrev && bytes.Compare(d.key, d.prevKey) <= 0 {
		return fmt.Errorf("%w: key %q does not follow %q", ErrBadImage, d.key, d.prevKey)
	}
	d.prevKey = append(d.prevKey[:0], d.key...)
	d.hasPrev = true
	if d.value, err = d.field(d.value, "value"); err != nil {
		return err
	}
	return nil
}

// field reads a uvarint length and that many bytes into buf.
func (d *imageDecoder) field(buf []byte, what string) ([]byte, error) {
	n, err := d.uvarint(what)
	if err != nil {
		return buf, err
	}
	if n > maxFieldLen {
		return buf, fmt.Errorf("%w: %s length %d exceeds %d", ErrBadImage, what, n, maxFieldLen)
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

func (d *imageDecoder) trailer(count uint64) error {
	var trailer [8 + 4]byte
	if _, err := io.ReadFull(d.r, trailer[:]); err != nil {
		return d.truncated("trailer", err)
	}
	d.crc = crc32.Update(d.crc, castagnoli, trailer[:8])
	if want := binary.BigEndian.Uint32(trailer[8:]); want != d.crc {
		return fmt.Errorf("%w: checksum mismatch (stored %#08x, computed %#08x)", ErrBadImage, want, d.crc)
	}
	if stored := binary.BigEndian.Uint64(trailer[:8]); stored != count {
		return fmt.Errorf("%w: trailer counts %d records, image holds %d", ErrBadImage, stored, count)
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		if err != nil {
			return fmt.Errorf("read after image trailer: %w", err)
		}
		return fmt.Errorf("%w: data after the trailer", ErrBadImage)
	}
	return nil
}

// uvarint reads one unsigned varint (encoding/binary's format).
func (d *imageDecoder) uvarint(what string) (uint64, error) {
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
			// Padded encodings would give one image several byte forms.
			return 0, fmt.Errorf("%w: %s length is not minimally encoded", ErrBadImage, what)
		}
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("%w: %s length overflows 64 bits", ErrBadImage, what)
}

// ReadByte consumes and hashes one byte.
func (d *imageDecoder) ReadByte() (byte, error) {
	b, err := d.r.ReadByte()
	if err != nil {
		return 0, err
	}
	d.one[0] = b
	d.crc = crc32.Update(d.crc, castagnoli, d.one[:])
	return b, nil
}

// truncated turns an early end of stream into an ErrBadImage and passes
// genuine read errors through.
func (d *imageDecoder) truncated(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated in %s", ErrBadImage, what)
	}
	return fmt.Errorf("read image %s: %w", what, err)
}
