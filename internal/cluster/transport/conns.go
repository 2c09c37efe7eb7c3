package transport

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// connTracker remembers the connections the transport's HTTP clients
// dialled so that Stop can close them all: an HTTP client closes only idle
// connections, and one stuck writing to a stalled peer is not idle.
type connTracker struct {
	dialer *net.Dialer
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func newConnTracker(d *net.Dialer) *connTracker {
	return &connTracker{dialer: d, conns: map[*trackedConn]struct{}{}}
}

func (ct *connTracker) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := ct.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, tracker: ct}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.closed {
		c.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, ErrStopped)
	}
	ct.conns[tc] = struct{}{}
	return tc, nil
}

// closeAll closes every connection and refuses new ones.
func (ct *connTracker) closeAll() {
	ct.mu.Lock()
	ct.closed = true
	conns := ct.conns
	ct.conns = map[*trackedConn]struct{}{}
	ct.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	tracker *connTracker
}

func (c *trackedConn) Close() error {
	c.tracker.mu.Lock()
	delete(c.tracker.conns, c)
	c.tracker.mu.Unlock()
	return c.Conn.Close()
}

// deadlineConn fails a read or write that makes no progress for timeout:
// etcd's timeout connections, which is how a stream notices a peer that
// froze or a link that was cut without a reset.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
