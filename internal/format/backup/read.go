package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/metastore-io/metastore/internal/format/kvimage"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// ErrCorrupt is wrapped by every error about a file's content: damaged,
// truncated, or not a MetaStore snapshot at all.
var ErrCorrupt = errors.New("not a valid MetaStore snapshot file")

const (
	// minImageLen is an image without records: magic, version, end tag,
	// count and CRC.
	minImageLen = kvimage.MagicLen + 2 + 1 + 8 + 4
	// boltMagic is what a bbolt database, and so an etcd snapshot, holds
	// at byte 16 of its first page (little endian).
	boltMagic       = 0xED0CDAED
	boltMagicOffset = 16
	// loadBatchBytes bounds the keys and values LoadInto puts in one
	// backend batch.
	loadBatchBytes = 16 << 20
)

// File is an open snapshot file whose framing and digest were verified.
// The records are checked again (order, count, CRC) as they are read.
type File struct {
	// Progress, if set, is told now and then how many of the image's
	// bytes Records (and so LoadInto) has decoded.
	Progress func(done, total int64)

	path     string
	f        *os.File
	size     int64
	imageLen int64
}

// Open opens the snapshot file at path and verifies it whole: size,
// sha256 digest, footer and padding. Every problem with the content is an
// error wrapping ErrCorrupt that names the file.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open snapshot: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("stat snapshot %s: %w", path, err), f.Close())
	}
	if !st.Mode().IsRegular() {
		return nil, errors.Join(fmt.Errorf("snapshot %s: %w: not a regular file", path, ErrCorrupt), f.Close())
	}
	imageLen, err := Verify(f, st.Size())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("snapshot %s: %w", path, err), f.Close())
	}
	return &File{path: path, f: f, size: st.Size(), imageLen: imageLen}, nil
}

// Verify checks a whole snapshot file of the given size read through r
// and returns the length of its image. It reads the file once to hash it
// and never allocates more than a few blocks, whatever the input.
func Verify(r io.ReaderAt, size int64) (imageLen int64, err error) {
	if err := checkKind(r, size); err != nil {
		return 0, err
	}
	const minSize = blockSize + DigestSize
	if size < minSize {
		return 0, fmt.Errorf("%w: %d bytes, shorter than the smallest snapshot (%d): truncated?", ErrCorrupt, size, minSize)
	}
	if size%blockSize != DigestSize {
		return 0, fmt.Errorf("%w: %d bytes is not whole %d-byte blocks plus a sha256 digest: truncated?", ErrCorrupt, size, blockSize)
	}
	bodyLen := size - DigestSize
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, bodyLen)); err != nil {
		return 0, fmt.Errorf("read snapshot: %w", err)
	}
	stored := make([]byte, DigestSize)
	if _, err := r.ReadAt(stored, bodyLen); err != nil {
		return 0, fmt.Errorf("read snapshot digest: %w", err)
	}
	if computed := h.Sum(nil); !bytes.Equal(stored, computed) {
		return 0, fmt.Errorf("%w: sha256 mismatch (stored %x, computed %x): the file is damaged or truncated", ErrCorrupt, stored, computed)
	}
	// The digest matched: what follows checks the writer, not the disk.
	footer := make([]byte, footerSize)
	if _, err := r.ReadAt(footer, bodyLen-footerSize); err != nil {
		return 0, fmt.Errorf("read snapshot footer: %w", err)
	}
	if string(footer[8:]) != footerMagic {
		return 0, fmt.Errorf("%w: no footer (found %q)", ErrCorrupt, footer[8:])
	}
	imageLen = int64(binary.BigEndian.Uint64(footer))
	// Padding is the fewest zeros that make whole blocks: less than one.
	if imageLen < minImageLen || imageLen > bodyLen-footerSize || bodyLen-footerSize-imageLen >= blockSize {
		return 0, fmt.Errorf("%w: footer gives an image of %d bytes in a body of %d", ErrCorrupt, imageLen, bodyLen)
	}
	pad := make([]byte, bodyLen-footerSize-imageLen)
	if _, err := r.ReadAt(pad, imageLen); err != nil {
		return 0, fmt.Errorf("read snapshot padding: %w", err)
	}
	if !allZero(pad) {
		return 0, fmt.Errorf("%w: padding after the image is not zero", ErrCorrupt)
	}
	return imageLen, nil
}

// checkKind looks at the first bytes, to say what a file is when it is
// not a MetaStore snapshot rather than just that its digest is wrong.
func checkKind(r io.ReaderAt, size int64) error {
	head := make([]byte, min(size, boltMagicOffset+4))
	if _, err := r.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read snapshot: %w", err)
	}
	if bytes.HasPrefix(head, []byte(imageFormat.Magic)) {
		return nil
	}
	if len(head) == boltMagicOffset+4 && binary.LittleEndian.Uint32(head[boltMagicOffset:]) == boltMagic {
		return fmt.Errorf("%w: it is an etcd snapshot (a bbolt database); MetaStore restores only snapshots saved from MetaStore, restore this one with etcdutl", ErrCorrupt)
	}
	if len(head) < len(imageFormat.Magic) {
		return fmt.Errorf("%w: %d bytes, shorter than its magic: truncated?", ErrCorrupt, size)
	}
	return fmt.Errorf("%w: it starts with %q, not the MetaStore snapshot magic %q", ErrCorrupt, head[:len(imageFormat.Magic)], imageFormat.Magic)
}

func allZero(p []byte) bool {
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// BodySize is the file's size without the digest: what etcd's tools call
// the snapshot's total size.
func (f *File) BodySize() int64 { return f.size - DigestSize }

// Records calls fn with every key and value in order and returns how
// many there were. The slices are reused after fn returns. The image's
// CRC can only be checked at its end, so a nil error is what says the
// records were genuine; an error from fn stops the walk and is returned.
func (f *File) Records(fn func(key, value []byte) error) (uint64, error) {
	var r io.ReaderAt = f.f
	if f.Progress != nil {
		r = &progressReader{r: f.f, total: f.imageLen, progress: f.Progress}
	}
	n, err := decodeImage(r, f.imageLen, f.path, fn)
	if err == nil && f.Progress != nil {
		f.Progress(f.imageLen, f.imageLen)
	}
	return n, err
}

// progressReader reports how far a sequential reader has read, every
// progressStep bytes.
type progressReader struct {
	r        io.ReaderAt
	read     int64
	next     int64
	total    int64
	progress func(done, total int64)
}

const progressStep = 4 << 20

func (p *progressReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.r.ReadAt(b, off)
	p.read = max(p.read, off+int64(n))
	if p.read >= p.next {
		p.next = p.read + progressStep
		p.progress(min(p.read, p.total), p.total)
	}
	return n, err
}

// decodeImage decodes the image at the start of a verified file.
func decodeImage(r io.ReaderAt, imageLen int64, path string, fn func(key, value []byte) error) (uint64, error) {
	n, err := kvimage.Decode(io.NewSectionReader(r, 0, imageLen), imageFormat, fn)
	if err != nil {
		return n, fmt.Errorf("snapshot %s: %w", path, wrapCorrupt(err))
	}
	return n, nil
}

// wrapCorrupt makes a kvimage format error an ErrCorrupt too.
func wrapCorrupt(err error) error {
	if errors.Is(err, kvimage.ErrCorrupt) && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// LoadInto writes every record into b, which should be empty, in batches
// of about loadBatchBytes. Batches are committed as they fill, before the
// image's CRC is checked at its end: on error, b holds part of the file
// and must be thrown away.
func (f *File) LoadInto(b kvstore.Backend) (uint64, error) {
	batch := b.NewBatch()
	var pending int
	n, err := f.Records(func(key, value []byte) error {
		batch.Put(key, value)
		if pending += len(key) + len(value); pending < loadBatchBytes {
			return nil
		}
		pending = 0
		full := batch
		batch = b.NewBatch()
		if err := full.Commit(); err != nil {
			return fmt.Errorf("load snapshot into the storage engine: %w", err)
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	if err := batch.Commit(); err != nil {
		return n, fmt.Errorf("load snapshot into the storage engine: %w", err)
	}
	return n, nil
}

// Close closes the file.
func (f *File) Close() error {
	if err := f.f.Close(); err != nil {
		return fmt.Errorf("close snapshot %s: %w", f.path, err)
	}
	return nil
}
