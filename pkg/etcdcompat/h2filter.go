package etcdcompat

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
)

// HTTP/2 framing (RFC 9113): the client preface, then frames of a 9-byte
// header (24-bit length, type, flags, stream) and a payload.
const (
	h2PrefaceLen     = 24
	h2FrameHeaderLen = 9
	h2FrameSettings  = 0x4
	h2FlagAck        = 0x1
)

// h2AckFilterListener hands out connections that drop the first
// SETTINGS ACK their client sends.
type h2AckFilterListener struct{ net.Listener }

func (l h2AckFilterListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &h2AckFilter{Conn: c, r: bufio.NewReader(c)}, nil
}

// h2AckFilter is an HTTP/2 connection whose client acknowledged, before
// anything else, a SETTINGS frame the connection matcher sent on the
// server's behalf: that acknowledgement is dropped, so the HTTP/2 server,
// which sends its own SETTINGS, sees exactly one ACK for it (a second
// one is a protocol error to it). Everything else passes unchanged; once
// the ACK is gone the connection is read straight through.
type h2AckFilter struct {
	net.Conn
	r       *bufio.Reader
	pending []byte // bytes parsed but not yet returned
	state   int    // h2Preface, h2Frames, h2Through
}

const (
	h2Preface = iota
	h2Frames
	h2Through
)

// NetConn is the connection underneath, for code that looks for the TCP
// connection under its wrappers (lockservice's TCP_USER_TIMEOUT).
func (c *h2AckFilter) NetConn() net.Conn { return c.Conn }

func (c *h2AckFilter) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		switch c.state {
		case h2Through:
			return c.r.Read(p)
		case h2Preface:
			buf := make([]byte, h2PrefaceLen)
			if _, err := io.ReadFull(c.r, buf); err != nil {
				return 0, err
			}
			c.pending, c.state = buf, h2Frames
		case h2Frames:
			frame, err := c.readFrame()
			if err != nil {
				return 0, err
			}
			if frame[3] == h2FrameSettings && frame[4]&h2FlagAck != 0 {
				c.state = h2Through
				continue
			}
			c.pending = frame
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// readFrame reads one whole frame, header and payload.
func (c *h2AckFilter) readFrame() ([]byte, error) {
	var hdr [h2FrameHeaderLen]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(append([]byte{0}, hdr[:3]...))) // at most 16 MiB
	frame := make([]byte, h2FrameHeaderLen+n)
	copy(frame, hdr[:])
	if _, err := io.ReadFull(c.r, frame[h2FrameHeaderLen:]); err != nil {
		return nil, err
	}
	return frame, nil
}
