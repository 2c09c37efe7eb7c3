package lockservice

import (
	"context"
	"net"
	"time"

	"github.com/soheilhy/cmux"
)

// connKey carries the accepted connection in a request's context.
type connKey struct{}

// ConnContext is http.Server.ConnContext for the client listener: it lets
// a /lock request reach its TCP connection to bound how long the kernel
// keeps it alive without acknowledgements (see bindConnection).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// tcpConnOf finds the TCP connection under the TLS and cmux wrappers.
func tcpConnOf(c net.Conn) *net.TCPConn {
	for range 8 {
		switch conn := c.(type) {
		case *net.TCPConn:
			return conn
		case *cmux.MuxConn:
			c = conn.Conn
		case interface{ NetConn() net.Conn }: // *tls.Conn
			c = conn.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// bindConnection makes a vanished client (its host down or cut off, so no
// FIN or RST ever comes) fail the connection within timeout: the kernel
// aborts a TCP connection whose sent data (the stream's heartbeats) stays
// unacknowledged that long, instead of retransmitting for many minutes.
// With smallBuffer (an HTTP/1 connection, which carries this stream
// alone) it also shrinks the connection's send buffer to lockSendBuffer,
// so that a client that stops reading is noticed once its receive buffer
// and this small one are full of padded heartbeats, instead of after the
// megabytes the kernel's send autotuning would otherwise queue. It
// reports whether the timeout could be set.
func bindConnection(ctx context.Context, timeout time.Duration, smallBuffer bool) bool {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	tcp := tcpConnOf(c)
	if tcp == nil {
		return false
	}
	if smallBuffer {
		_ = tcp.SetWriteBuffer(lockSendBuffer) // without it only the bound is longer
	}
	return setUserTimeout(tcp, timeout) == nil
}
