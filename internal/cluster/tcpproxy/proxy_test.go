package tcpproxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"
)

// backend answers every connection with its name, then echoes what it
// reads until the client's half-close.
type backend struct {
	name string
	l    net.Listener
}

func startBackend(t *testing.T, name, addr string) *backend {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := io.WriteString(c, b.name+"\n"); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return b
}

func srvOf(t *testing.T, addr string) *net.SRV {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return &net.SRV{Target: host, Port: uint16(p)}
}

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// logEvents is a slog handler that reports each message on a channel.
type logEvents chan string

func (e logEvents) Enabled(context.Context, slog.Level) bool { return true }
func (e logEvents) Handle(_ context.Context, r slog.Record) error {
	select {
	case e <- r.Message:
	default:
	}
	return nil
}
func (e logEvents) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e logEvents) WithGroup(string) slog.Handler      { return e }

// waitLog waits for msg among the proxy's log messages.
func (e logEvents) waitLog(t *testing.T, msg string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-e:
			if m == msg {
				return
			}
		case <-deadline:
			t.Fatalf("no %q logged within 10 s", msg)
		}
	}
}

func startProxy(t *testing.T, retry time.Duration, eps ...*net.SRV) (string, logEvents) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	events := make(logEvents, 100)
	p, err := New(Config{Listener: l, Endpoints: eps, RetryDelay: retry, Logger: slog.New(events)})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve() }()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	events.waitLog(t, "ready to proxy client requests")
	return l.Addr().String(), events
}

// through connects through the proxy and returns the backend's name, or
// "" when the proxy closed the connection.
func through(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var buf [64]byte
	n, err := c.Read(buf[:])
	if err == io.EOF {
		return ""
	}
	if err != nil {
		t.Fatalf("read through proxy: %v", err)
	}
	return string(buf[:n-1])
}

func TestRoundRobinInOrder(t *testing.T) {
	a, b, c := startBackend(t, "a", "127.0.0.1:0"), startBackend(t, "b", "127.0.0.1:0"), startBackend(t, "c", "127.0.0.1:0")
	addr, _ := startProxy(t, time.Minute, srvOf(t, a.l.Addr().String()), srvOf(t, b.l.Addr().String()), srvOf(t, c.l.Addr().String()))
	var got string
	for range 6 {
		got += through(t, addr)
	}
	if got != "abcabc" {
		t.Fatalf("backends in order %q, want abcabc", got)
	}
}

func TestHalfCloseCarriesThrough(t *testing.T) {
	a := startBackend(t, "a", "127.0.0.1:0")
	addr, _ := startProxy(t, time.Minute, srvOf(t, a.l.Addr().String()))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(all) != "a\nping" {
		t.Fatalf("read %q after half-close, want the name and the echo", all)
	}
}

func TestDeadEndpointSkippedThenRetried(t *testing.T) {
	dead := deadAddr(t)
	b := startBackend(t, "b", "127.0.0.1:0")
	const retry = 300 * time.Millisecond
	addr, events := startProxy(t, retry, srvOf(t, dead), srvOf(t, b.l.Addr().String()))

	// The first endpoint refuses: the client is served by the second.
	if got := through(t, addr); got != "b" {
		t.Fatalf("first connection served by %q, want b", got)
	}
	events.waitLog(t, "deactivated endpoint")
	// Still dead at the first retry: it stays out.
	events.waitLog(t, "failed to activate endpoint (stay inactive for another interval)")
	for range 3 {
		if got := through(t, addr); got != "b" {
			t.Fatalf("served by %q while the first endpoint is inactive, want b", got)
		}
	}
	// Back: a later retry reactivates it and the rotation includes it.
	startBackend(t, "a", dead)
	events.waitLog(t, "activated")
	seen := map[string]bool{}
	for range 2 {
		seen[through(t, addr)] = true
	}
	if !seen["a"] || !seen["b"] {
		t.Fatalf("backends after reactivation %v, want both", seen)
	}
}

func TestAllEndpointsDeadClosesClient(t *testing.T) {
	addr, _ := startProxy(t, time.Minute, srvOf(t, deadAddr(t)), srvOf(t, deadAddr(t)))
	if got := through(t, addr); got != "" {
		t.Fatalf("served by %q with every endpoint dead", got)
	}
}

func TestBestPriorityClassFirst(t *testing.T) {
	a, b := startBackend(t, "a", "127.0.0.1:0"), startBackend(t, "b", "127.0.0.1:0")
	low, high := srvOf(t, a.l.Addr().String()), srvOf(t, b.l.Addr().String())
	low.Priority, high.Priority = 20, 10
	addr, _ := startProxy(t, time.Minute, low, high)
	for range 4 {
		if got := through(t, addr); got != "b" {
			t.Fatalf("served by %q, want b (priority 10 before 20)", got)
		}
	}
}

func TestWeightsShareConnections(t *testing.T) {
	a, b := startBackend(t, "a", "127.0.0.1:0"), startBackend(t, "b", "127.0.0.1:0")
	heavy, light := srvOf(t, a.l.Addr().String()), srvOf(t, b.l.Addr().String())
	heavy.Weight, light.Weight = 3, 1
	addr, _ := startProxy(t, time.Minute, heavy, light)
	count := map[string]int{}
	const n = 200
	for range n {
		count[through(t, addr)]++
	}
	// Expected 150 / 50; a binomial(200, 0.25) is outside 25..75 with
	// probability below 1e-5.
	if count["b"] < 25 || count["b"] > 75 || count["a"]+count["b"] != n {
		t.Fatalf("connections per backend %v, want about 3:1", count)
	}
}
