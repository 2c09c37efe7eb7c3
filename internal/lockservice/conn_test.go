package lockservice

import (
	"context"
	"crypto/tls"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/soheilhy/cmux"
)

// TestBindConnectionReachesTheTCPSocket: through the cmux wrapper (and a
// TLS one), the /lock request's connection gets TCP_USER_TIMEOUT.
func TestBindConnectionReachesTheTCPSocket(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_USER_TIMEOUT is Linux-only")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		c, err := net.Dial("tcp", l.Addr().String())
		if err == nil {
			<-done
			c.Close()
		}
	}()
	accepted, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	for name, wrapped := range map[string]net.Conn{
		"cmux":     &cmux.MuxConn{Conn: accepted},
		"tls+cmux": &cmux.MuxConn{Conn: tls.Server(accepted, &tls.Config{})},
	} {
		ctx := ConnContext(context.Background(), wrapped)
		if !bindConnection(ctx, 7*time.Second, true) {
			t.Fatalf("%s: the TCP connection was not found", name)
		}
		got, err := userTimeout(accepted.(*net.TCPConn))
		if err != nil || got != 7*time.Second {
			t.Fatalf("%s: TCP_USER_TIMEOUT %v, %v; want 7s", name, got, err)
		}
	}
	if bindConnection(context.Background(), time.Second, true) {
		t.Fatal("bound a connection that is not in the context")
	}
}
