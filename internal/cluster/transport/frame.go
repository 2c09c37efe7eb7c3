package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3/raftpb"
)

// frameHeaderSize is the length prefix of a frame: a big-endian uint32.
const frameHeaderSize = 4

// readChunk is how much of a frame is read at a time once it outgrows the
// decoder's buffer: a length prefix from a broken or hostile peer cannot
// make the decoder allocate more than the bytes that actually arrived.
const readChunk = 1 << 20

// errFrameTooLarge is wrapped by errors about frames over the size limit.
var errFrameTooLarge = errors.New("frame too large")

// putFrame encodes m into dst, which must hold exactly
// frameHeaderSize+size bytes (size is m.Size(), computed once by the caller).
func putFrame(dst []byte, m *raftpb.Message, size int) error {
	binary.BigEndian.PutUint32(dst, uint32(size))
	if _, err := m.MarshalToSizedBuffer(dst[frameHeaderSize : frameHeaderSize+size]); err != nil {
		return fmt.Errorf("marshal %s to %x: %w", m.Type, m.To, err)
	}
	return nil
}

// appendFrame appends the frame of m to dst.
func appendFrame(dst []byte, m *raftpb.Message) ([]byte, error) {
	size := m.Size()
	start := len(dst)
	total := frameHeaderSize + size
	if cap(dst)-start < total {
		grown := make([]byte, start, start+total)
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+total]
	if err := putFrame(dst[start:], m, size); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// frameReader reads frames from a stream. The payload it returns is valid
// until the next call.
type frameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newFrameReader(r io.Reader, maxFrame int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: maxFrame}
}

// next reads one frame. It returns io.EOF only at a frame boundary; a
// stream that ends inside a frame is io.ErrUnexpectedEOF.
func (fr *frameReader) next() ([]byte, error) {
	var hdr [frameHeaderSize]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > fr.max {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, n, fr.max)
	}
	if n <= cap(fr.buf) {
		fr.buf = fr.buf[:n]
		if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
			return nil, noEOF(err)
		}
		return fr.buf, nil
	}
	// Grow as the bytes arrive rather than trusting the prefix up front.
	fr.buf = fr.buf[:0]
	for len(fr.buf) < n {
		chunk := min(n-len(fr.buf), readChunk)
		start := len(fr.buf)
		if cap(fr.buf)-start < chunk {
			grown := make([]byte, start, max(2*cap(fr.buf), start+chunk))
			copy(grown, fr.buf)
			fr.buf = grown
		}
		fr.buf = fr.buf[:start+chunk]
		if _, err := io.ReadFull(fr.r, fr.buf[start:]); err != nil {
			return nil, noEOF(err)
		}
	}
	return fr.buf, nil
}

// readMessage reads the next frame and decodes it into m (which should be
// zero: the decoded Entries are new slices that raft may keep).
func (fr *frameReader) readMessage(m *raftpb.Message) (int, error) {
	payload, err := fr.next()
	if err != nil {
		return 0, err
	}
	if err := m.Unmarshal(payload); err != nil {
		return 0, fmt.Errorf("decode raft message (%d bytes): %w", len(payload), err)
	}
	return frameHeaderSize + len(payload), nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
