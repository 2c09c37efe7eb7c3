package rafthttp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3/raftpb"
)

// DefaultReadLimit is the largest message or entry a decoder accepts by
// default: etcd's readBytesLimit, 512 MiB.
const DefaultReadLimit = 512 << 20

// ErrTooLarge is wrapped by a decoder's error when a length passes its
// limit.
var ErrTooLarge = errors.New("rafthttp: message exceeds the read limit")

// The first byte of each msgapp (v2) frame.
const (
	appFrameLinkHeartbeat byte = 0
	appFrameEntries       byte = 1
	appFrameMessage       byte = 2
)

// LinkHeartbeat is the message an idle stream carries to keep its
// connection alive; readers drop it.
var LinkHeartbeat = raftpb.Message{Type: raftpb.MsgHeartbeat}

// IsLinkHeartbeat reports whether m is a link heartbeat rather than a
// raft heartbeat (which always names its sender and receiver).
func IsLinkHeartbeat(m *raftpb.Message) bool {
	return m.Type == raftpb.MsgHeartbeat && m.From == 0 && m.To == 0
}

// MessageEncoder writes the "message" stream encoding. It is not safe for
// concurrent use.
type MessageEncoder struct {
	w   io.Writer
	buf []byte // reused: length prefix and message
}

// NewMessageEncoder encodes to w.
func NewMessageEncoder(w io.Writer) *MessageEncoder { return &MessageEncoder{w: w} }

// Encode writes m in one Write call.
func (e *MessageEncoder) Encode(m *raftpb.Message) error {
	n := m.Size()
	e.buf = grow(e.buf, 8+n)
	binary.BigEndian.PutUint64(e.buf, uint64(n))
	if _, err := m.MarshalTo(e.buf[8:]); err != nil {
		return fmt.Errorf("rafthttp: marshal %v: %w", m.Type, err)
	}
	_, err := e.w.Write(e.buf)
	return err
}

// MessageDecoder reads the "message" stream encoding.
type MessageDecoder struct {
	r     io.Reader
	limit uint64
	hdr   [8]byte
	block []byte // reused: Unmarshal copies what it keeps
}

// NewMessageDecoder decodes from r, refusing messages over limit bytes
// (0: DefaultReadLimit).
func NewMessageDecoder(r io.Reader, limit uint64) *MessageDecoder {
	if limit == 0 {
		limit = DefaultReadLimit
	}
	return &MessageDecoder{r: r, limit: limit}
}

// Decode reads the next message. At a clean end of the stream it returns
// io.EOF; a stream cut inside a message returns io.ErrUnexpectedEOF.
func (d *MessageDecoder) Decode() (raftpb.Message, error) {
	var m raftpb.Message
	buf, err := readBlock(d.r, d.hdr[:], d.limit, d.block)
	if err != nil {
		return m, err
	}
	d.block = keep(buf)
	if err := m.Unmarshal(buf); err != nil {
		return raftpb.Message{}, fmt.Errorf("rafthttp: decode message: %w", err)
	}
	return m, nil
}

// AppEncoder writes the msgapp (v2) stream encoding to one peer. It is
// not safe for concurrent use.
type AppEncoder struct {
	w           io.Writer
	term, index uint64 // what the reader expects next (package doc)
	buf         []byte // reused frame
}

// NewAppEncoder encodes to w.
func NewAppEncoder(w io.Writer) *AppEncoder { return &AppEncoder{w: w} }

// Encode writes m, a MsgApp or a link heartbeat, in one Write call.
func (e *AppEncoder) Encode(m *raftpb.Message) error {
	switch {
	case IsLinkHeartbeat(m):
		e.buf = append(e.buf[:0], appFrameLinkHeartbeat)
	case m.Index == e.index && m.LogTerm == e.term && m.Term == m.LogTerm:
		size := 1 + 8 + 8
		for i := range m.Entries {
			size += 8 + m.Entries[i].Size()
		}
		e.buf = grow(e.buf, size)
		e.buf[0] = appFrameEntries
		binary.BigEndian.PutUint64(e.buf[1:], uint64(len(m.Entries)))
		off := 9
		for i := range m.Entries {
			n := m.Entries[i].Size()
			binary.BigEndian.PutUint64(e.buf[off:], uint64(n))
			if _, err := m.Entries[i].MarshalTo(e.buf[off+8:]); err != nil {
				return fmt.Errorf("rafthttp: marshal entry %d: %w", m.Entries[i].Index, err)
			}
			off += 8 + n
		}
		binary.BigEndian.PutUint64(e.buf[off:], m.Commit)
		e.index += uint64(len(m.Entries))
	default:
		n := m.Size()
		e.buf = grow(e.buf, 1+8+n)
		e.buf[0] = appFrameMessage
		binary.BigEndian.PutUint64(e.buf[1:], uint64(n))
		if _, err := m.MarshalTo(e.buf[9:]); err != nil {
			return fmt.Errorf("rafthttp: marshal %v: %w", m.Type, err)
		}
		e.term, e.index = m.Term, lastIndex(m)
	}
	_, err := e.w.Write(e.buf)
	return err
}

// AppDecoder reads the msgapp (v2) stream encoding from the peer remote
// to the member local.
type AppDecoder struct {
	r             io.Reader
	local, remote uint64
	limit         uint64
	term, index   uint64 // what the next entries frame continues from
	hdr           [8]byte
	block         []byte // reused for entries, which Unmarshal copies
}

// NewAppDecoder decodes from r, refusing messages and entries over limit
// bytes (0: DefaultReadLimit).
func NewAppDecoder(r io.Reader, local, remote, limit uint64) *AppDecoder {
	if limit == 0 {
		limit = DefaultReadLimit
	}
	return &AppDecoder{r: r, local: local, remote: remote, limit: limit}
}

// Decode reads the next message: a link heartbeat or a MsgApp. At a
// clean end of the stream it returns io.EOF.
func (d *AppDecoder) Decode() (raftpb.Message, error) {
	var kind [1]byte
	if _, err := io.ReadFull(d.r, kind[:]); err != nil {
		return raftpb.Message{}, err
	}
	switch kind[0] {
	case appFrameLinkHeartbeat:
		return LinkHeartbeat, nil
	case appFrameEntries:
		return d.decodeEntries()
	case appFrameMessage:
		buf, err := readBlock(d.r, d.hdr[:], d.limit, d.block)
		if err != nil {
			return raftpb.Message{}, noEOF(err)
		}
		d.block = keep(buf)
		var m raftpb.Message
		if err := m.Unmarshal(buf); err != nil {
			return raftpb.Message{}, fmt.Errorf("rafthttp: decode msgapp message: %w", err)
		}
		d.term, d.index = m.Term, lastIndex(&m)
		return m, nil
	default:
		return raftpb.Message{}, fmt.Errorf("rafthttp: frame kind %d in a msgapp stream", kind[0])
	}
}

func (d *AppDecoder) decodeEntries() (raftpb.Message, error) {
	m := raftpb.Message{Type: raftpb.MsgApp, From: d.remote, To: d.local, Term: d.term, LogTerm: d.term, Index: d.index}
	if _, err := io.ReadFull(d.r, d.hdr[:]); err != nil {
		return raftpb.Message{}, noEOF(err)
	}
	count := binary.BigEndian.Uint64(d.hdr[:])
	for i := uint64(0); i < count; i++ {
		var err error
		d.block, err = readBlock(d.r, d.hdr[:], d.limit, d.block)
		if err != nil {
			return raftpb.Message{}, noEOF(err)
		}
		d.block = keep(d.block)
		var ent raftpb.Entry
		if err := ent.Unmarshal(d.block); err != nil {
			return raftpb.Message{}, fmt.Errorf("rafthttp: decode entry %d of %d: %w", i+1, count, err)
		}
		m.Entries = append(m.Entries, ent)
	}
	if _, err := io.ReadFull(d.r, d.hdr[:]); err != nil {
		return raftpb.Message{}, noEOF(err)
	}
	m.Commit = binary.BigEndian.Uint64(d.hdr[:])
	d.index += count
	return m, nil
}

// readBlock reads an 8-byte big-endian length and that many bytes, into
// reuse if it is large enough.
func readBlock(r io.Reader, hdr []byte, limit uint64, reuse []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint64(hdr)
	if n > limit {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, limit)
	}
	if n > preallocLimit {
		// Grow with what arrives, so that a length alone cannot make the
		// reader allocate it.
		buf, err := io.ReadAll(io.LimitReader(r, int64(n)))
		if err == nil && uint64(len(buf)) < n {
			err = io.ErrUnexpectedEOF
		}
		return buf, err
	}
	buf := grow(reuse, int(n))
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, noEOF(err)
	}
	return buf, nil
}

// preallocLimit is the largest block read into a buffer of its announced
// length; longer ones grow as their bytes arrive.
const preallocLimit = 1 << 20

// noEOF turns io.EOF inside a frame into io.ErrUnexpectedEOF: only the
// end of the stream before a frame's first byte is clean.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func lastIndex(m *raftpb.Message) uint64 {
	if n := len(m.Entries); n > 0 {
		return m.Entries[n-1].Index
	}
	return m.Index
}

// maxKeptBlock is the largest read buffer a decoder keeps for the next
// message; one left by a larger message is let go.
const maxKeptBlock = 4 << 20

// keep is what a decoder keeps of the buffer it just read into. The
// slice may still be used by the caller until the next read.
func keep(b []byte) []byte {
	if cap(b) > maxKeptBlock {
		return nil
	}
	return b
}

// grow returns b resized to n, reallocated only when too small.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
