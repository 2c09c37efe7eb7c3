package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/metastore-io/metastore/internal/format/kvimage"
	"github.com/metastore-io/metastore/internal/kvstore"
)

const (
	// DigestSize is the length of the sha256 digest that ends a file.
	DigestSize = sha256.Size
	// blockSize is what the body is padded to a multiple of. etcd's tools
	// recognise a snapshot that carries its digest by the file size alone
	// (size % 512 == 32: a bbolt file is whole pages), so the body must be
	// whole 512-byte blocks for `etcdctl snapshot save` to accept it.
	blockSize = 512
	// footerSize is the image length (u64) plus footerMagic (8 bytes).
	footerSize = 8 + 8
	// footerMagic ends the body, so that a reader can tell a MetaStore
	// body from anything else that happens to be 512k+32 bytes long.
	footerMagic = "MSBACKUP"
	// writeBuffer is how much Write hands its writer at a time.
	writeBuffer = 64 << 10
)

// imageFormat frames the records. It names no storage engine: a snapshot
// of a member on one engine restores onto either.
var imageFormat = kvimage.Format{Name: "MetaStore snapshot", Magic: "MSBACKUP", Version: 1}

// Write writes the snapshot file of src, a consistent view of a store's
// backend: every key in order, the padding and footer, then the sha256
// of all of that. It returns the bytes written. src must not change while
// Write runs (a kvstore ReadView does not).
func Write(w io.Writer, src kvstore.Reader) (int64, error) {
	h := sha256.New()
	bw := bufio.NewWriterSize(w, writeBuffer)
	n, err := writeBody(io.MultiWriter(bw, h), src)
	if err != nil {
		return n, err
	}
	digest := h.Sum(make([]byte, 0, DigestSize))
	if _, err := bw.Write(digest); err != nil {
		return n, fmt.Errorf("write snapshot digest: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("write snapshot: %w", err)
	}
	return n + DigestSize, nil
}

// Size is the number of bytes Write will write for src. It encodes src
// once without keeping anything (a pass over every key, as Write is), so
// that a sender can announce the size up front, as etcd does from its
// database file; ctx ends it early.
func Size(ctx context.Context, src kvstore.Reader) (int64, error) {
	n, err := writeBody(&discard{ctx: ctx}, src)
	if err != nil {
		return 0, err
	}
	return n + DigestSize, nil
}

// writeBody writes image, padding and footer and returns their length.
func writeBody(w io.Writer, src kvstore.Reader) (int64, error) {
	enc := kvimage.NewEncoder(w, imageFormat)
	var recordErr error
	err := src.Ascend(nil, nil, func(key, value []byte) bool {
		recordErr = enc.Record(key, value)
		return recordErr == nil
	})
	if err == nil {
		err = recordErr
	}
	if err == nil {
		err = enc.Finish()
	}
	imageLen := enc.Written()
	if err != nil {
		return imageLen, fmt.Errorf("write snapshot image: %w", err)
	}
	tail := bodyTail(imageLen)
	if _, err := w.Write(tail); err != nil {
		return imageLen, fmt.Errorf("write snapshot footer: %w", err)
	}
	return imageLen + int64(len(tail)), nil
}

// bodyTail is the zero padding and the footer that follow an image of
// imageLen bytes: the fewest zeros that make the body whole blocks.
func bodyTail(imageLen int64) []byte {
	pad := (blockSize - (imageLen+footerSize)%blockSize) % blockSize
	tail := make([]byte, pad+footerSize)
	binary.BigEndian.PutUint64(tail[pad:], uint64(imageLen))
	copy(tail[pad+8:], footerMagic)
	return tail
}

// discard counts nothing and keeps nothing; it fails once ctx ends, which
// stops the encoder at its next buffer flush.
type discard struct{ ctx context.Context }

func (d *discard) Write(p []byte) (int, error) {
	if err := d.ctx.Err(); err != nil {
		return 0, err
	}
	return len(p), nil
}
