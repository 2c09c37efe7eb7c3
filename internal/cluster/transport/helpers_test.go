package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/host/tlsutil"

	"github.com/metastore-io/metastore/test/raftkit"
)

// raftkit.Timeout bounds every wait; generous for a loaded 2-core machine
// under -race.

// logCapture keeps a test's log lines, lets the test wait for one, and
// prints them all if the test fails.
type logCapture struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogCapture(t testing.TB, name string) (*logCapture, *slog.Logger) {
	lc := &logCapture{changed: make(chan struct{})}
	t.Cleanup(func() {
		if t.Failed() {
			lc.mu.Lock()
			t.Logf("%s logs:\n%s", name, lc.buf.String())
			lc.mu.Unlock()
		}
	})
	return lc, slog.New(slog.NewTextHandler(lc, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func (lc *logCapture) Write(p []byte) (int, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	close(lc.changed)
	lc.changed = make(chan struct{})
	return lc.buf.Write(p)
}

// waitFor blocks until a logged line contains every one of parts.
func (lc *logCapture) waitFor(t testing.TB, parts ...string) string {
	t.Helper()
	deadline := time.NewTimer(raftkit.Timeout)
	defer deadline.Stop()
	for {
		lc.mu.Lock()
		text, ch := lc.buf.String(), lc.changed
		lc.mu.Unlock()
		for _, line := range strings.Split(text, "\n") {
			if containsAll(line, parts) {
				return line
			}
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no log line containing %q", parts)
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// fakeRaft records what the transport hands to raft.
type fakeRaft struct {
	mu          sync.Mutex
	steps       []raftpb.Message
	unreachable map[uint64]int
	snapReports []snapshotReport
	changed     chan struct{}
	// onStep, if set, runs (without the lock) before a message is
	// recorded; an error is returned to the transport.
	onStep func(m raftpb.Message) error
}

type snapshotReport struct {
	to     uint64
	status raft.SnapshotStatus
}

func newFakeRaft() *fakeRaft {
	return &fakeRaft{unreachable: map[uint64]int{}, changed: make(chan struct{})}
}

func (f *fakeRaft) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeRaft) Step(_ context.Context, m raftpb.Message) error {
	if f.onStep != nil {
		if err := f.onStep(m); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.steps = append(f.steps, m)
	f.notifyLocked()
	return nil
}

func (f *fakeRaft) ReportUnreachable(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unreachable[id]++
	f.notifyLocked()
}

func (f *fakeRaft) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snapReports = append(f.snapReports, snapshotReport{to: id, status: status})
	f.notifyLocked()
}

// waitUntil blocks until cond holds (re-checked on every change) or the
// test deadline passes.
func (f *fakeRaft) waitUntil(t testing.TB, what string, cond func(f *fakeRaft) bool) {
	t.Helper()
	deadline := time.NewTimer(raftkit.Timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ok := cond(f)
		ch := f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for raft to see %s", what)
		}
	}
}

func (f *fakeRaft) snapshotReports() []snapshotReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]snapshotReport(nil), f.snapReports...)
}

func (f *fakeRaft) stepped() []raftpb.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]raftpb.Message(nil), f.steps...)
}

// member is one transport served on a loopback listener.
type member struct {
	id   uint64
	tr   *Transport
	url  string
	raft *fakeRaft
	logs *logCapture
	snap *raftsnap.Store
}

// testConfig has short timeouts so that failures show up quickly.
func testConfig(id, cluster uint64, logger *slog.Logger) Config {
	return Config{
		ID:               id,
		ClusterID:        cluster,
		Logger:           logger,
		DialTimeout:      time.Second,
		HandshakeTimeout: 5 * time.Second,
		ConnTimeout:      5 * time.Second,
		BackoffMin:       5 * time.Millisecond,
		BackoffMax:       100 * time.Millisecond,
		ProbeInterval:    time.Minute,
	}
}

// startMember serves a transport with a fake raft and a snapshot store;
// tweak adjusts its config.
func startMember(t testing.TB, id, cluster uint64, tweak func(*Config)) *member {
	t.Helper()
	logs, logger := newLogCapture(t, "member "+idString(id))
	store, err := raftsnap.Open(t.TempDir(), raftsnap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fr := newFakeRaft()
	cfg := testConfig(id, cluster, logger)
	cfg.Raft = fr
	cfg.Snapshots = func() *raftsnap.Store { return store }
	if tweak != nil {
		tweak(&cfg)
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, tr)
	t.Cleanup(tr.Stop)
	return &member{id: id, tr: tr, url: url, raft: fr, logs: logs, snap: store}
}

// serve runs tr's handler on a loopback listener until the test ends.
func serve(t testing.TB, tr *Transport) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if m, ok := tr.cfg.TLS.(*tlsutil.Material); ok {
		// Peer TLS: the listener cmd/metastore puts on an https peer URL.
		l, scheme = tlsutil.NewListener(l, m, tlsutil.ListenerConfig{Endpoint: "peer", CheckSAN: true, Logger: tr.cfg.Logger}), "https"
	}
	srv := &http.Server{Handler: tr.Handler()}
	tr.ConfigureServer(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return scheme + "://" + l.Addr().String()
}

func mustAddPeer(t testing.TB, tr *Transport, id uint64, urls ...string) {
	t.Helper()
	if err := tr.AddPeer(id, urls); err != nil {
		t.Fatal(err)
	}
}

// connect makes a and b peers of each other and waits for both streams.
func connect(t testing.TB, a, b *member) {
	t.Helper()
	mustAddPeer(t, a.tr, b.id, b.url)
	mustAddPeer(t, b.tr, a.id, a.url)
	waitActive(t, a.tr, b.id)
	waitActive(t, b.tr, a.id)
}

func waitActive(t testing.TB, tr *Transport, id uint64) {
	t.Helper()
	raftkit.WaitFor(t, "stream to "+idString(id), func() bool {
		st, ok := tr.PeerStatus(id)
		return ok && st.Active
	})
}

// proxy is a TCP relay between a member and a peer's listener that a test
// can pause (it stops reading, so the sender's writes back up) or cut
// (connections reset, new ones closed at once).
type proxy struct {
	l      net.Listener
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	paused  bool
	cut     bool
	closed  bool
	conns   map[net.Conn]struct{}
	accepts int
	wg      sync.WaitGroup
}

func newProxy(t testing.TB, targetURL string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: strings.TrimPrefix(targetURL, "http://"), conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) url() string { return "http://" + p.l.Addr().String() }

func (p *proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepts++
		refuse := p.cut || p.closed
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.relay(up, c)
		go p.relay(c, up)
	}
}

// relay copies src to dst, waiting at the gate before every read.
func (p *proxy) relay(dst, src net.Conn) {
	defer p.wg.Done()
	defer p.drop(dst, src)
	buf := make([]byte, 32<<10)
	for {
		if !p.gate() {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gate blocks while paused; false once the proxy is closed.
func (p *proxy) gate() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.paused && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *proxy) drop(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) setPaused(paused bool) {
	p.mu.Lock()
	p.paused = paused
	p.cond.Broadcast()
	p.mu.Unlock()
}

// setCut resets every connection and refuses new ones while cut.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
}

func (p *proxy) acceptCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.l.Close()
	p.wg.Wait()
}

// readerImage adapts a reader to the io.WriterTo raftsnap.Store.Save takes.
type readerImage struct{ r io.Reader }

func (ri readerImage) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, ri.r) }

// receive waits for a value on ch until the test deadline.
func receive[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(raftkit.Timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
