package lockservice

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metastore-io/metastore/pkg/lockapi"
	"github.com/metastore-io/metastore/pkg/lockclient"
	"github.com/metastore-io/metastore/test/framework"
)

const (
	// testTimeout bounds one scenario.
	testTimeout = 60 * time.Second
	// releaseBound is the documented bound for a cut connection to give
	// up its lock or place: the handler notices the close at once and
	// revokes the lease; the lease TTL (5 s) is the bound even if that
	// revoke were lost.
	releaseBound = 5 * time.Second
	// childEnv makes the test binary a lock-holding child process.
	childEnv = "LOCKSERVICE_CHILD"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

// requireMetaStore skips on etcd, which has no HTTP lock service.
func requireMetaStore(t *testing.T) {
	t.Helper()
	framework.SkipUnlessMetaStore(t, "the HTTP lock service (/v1/lock/)")
}

// runChild locks the resource named by spec ("url type resource node",
// then "ca cert key" files over TLS) through lockclient, prints "token N"
// and then holds the lock until it is killed, printing "lost T reason"
// (T in unix nanoseconds) if it is told it lost the lock.
func runChild(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 4 && len(f) != 7 {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", childEnv, spec)
		return 2
	}
	hc := http.DefaultClient
	if len(f) == 7 {
		conf, err := framework.ClientTLSConfig(f[4], &framework.CertPair{CertFile: f[5], KeyFile: f[6]})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		hc = &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
	}
	c, err := lockclient.New(lockclient.Config{Endpoints: []string{f[0]}, HTTPClient: hc})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	l, err := c.Lock(ctx, lockclient.Request{Type: f[1], ResourceID: f[2], NodeID: f[3]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("token %d\n", l.Token())
	select {
	case <-l.Lost():
		// The parent reads this on its own clock (unix nanoseconds are
		// the same on both sides of a network namespace).
		fmt.Printf("lost %d %v\n", time.Now().UnixNano(), l.Err())
	case <-ctx.Done():
	}
	<-ctx.Done()
	return 0
}

// service is one member's lock service as a test sees it; over the
// cluster's client TLS if it has one (E2E_TLS=1).
type service struct {
	t       *testing.T
	baseURL string
	client  *lockclient.Client
	http    *http.Client
	tls     *tls.Config // nil without client TLS
	tlsArgs []string    // ca, cert and key files for a child process
}

func newService(t *testing.T, c *framework.Cluster, m *framework.Member) *service {
	t.Helper()
	s := &service{t: t, baseURL: m.ClientURL(), http: http.DefaultClient}
	if tc := c.TLS(); tc != nil && tc.Client {
		conf, err := tc.ClientTLS()
		if err != nil {
			t.Fatal(err)
		}
		s.tls = conf
		s.http = &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
		s.tlsArgs = []string{tc.PKI.CA.CertFile, tc.ClientCert.CertFile, tc.ClientCert.KeyFile}
	}
	client, err := lockclient.New(lockclient.Config{Endpoints: []string{m.ClientURL()}, MaxRetries: -1, HTTPClient: s.http})
	if err != nil {
		t.Fatal(err)
	}
	s.client = client
	return s
}

// lock acquires, failing the test on error.
func (s *service) lock(ctx context.Context, typ, resource, node string) *lockclient.Lock {
	s.t.Helper()
	l, err := s.client.Lock(ctx, lockclient.Request{Type: typ, ResourceID: resource, NodeID: node})
	if err != nil {
		s.t.Fatalf("lock %s:%s as %s: %v", typ, resource, node, err)
	}
	return l
}

// waiter is a Lock call in the background that reports once queued.
type waiter struct {
	node   string
	queued chan int
	done   chan struct{}
	lock   *lockclient.Lock
	err    error
	at     time.Time // when Lock returned
}

// enqueue starts node's Lock call and returns once it is queued.
func (s *service) enqueue(ctx context.Context, typ, resource, node string) *waiter {
	s.t.Helper()
	w := &waiter{node: node, queued: make(chan int, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.lock, w.err = s.client.Lock(ctx, lockclient.Request{Type: typ, ResourceID: resource, NodeID: node,
			OnQueued: func(pos int) { w.queued <- pos }})
		w.at = time.Now()
	}()
	select {
	case <-w.queued:
	case <-w.done:
		s.t.Fatalf("%s was not queued: lock returned %v", node, w.err)
	case <-ctx.Done():
		s.t.Fatalf("%s was not queued: %v", node, ctx.Err())
	}
	return w
}

// acquired waits for the waiter's Lock to return the lock.
func (w *waiter) acquired(t *testing.T, ctx context.Context) *lockclient.Lock {
	t.Helper()
	select {
	case <-w.done:
	case <-ctx.Done():
		t.Fatalf("%s did not get the lock: %v", w.node, ctx.Err())
	}
	if w.err != nil {
		t.Fatalf("%s: %v", w.node, w.err)
	}
	return w.lock
}

// pending reports whether the waiter is still waiting.
func (w *waiter) pending() bool {
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

func (s *service) status(ctx context.Context, typ, resource string) lockapi.StatusResponse {
	s.t.Helper()
	q := url.Values{"Type": {typ}, "ResourceID": {resource}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.baseURL+lockapi.PathStatus+"?"+q.Encode(), nil)
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatalf("status: %v", err)
	}
	defer resp.Body.Close()
	var out lockapi.StatusResponse
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("status: %d %s", resp.StatusCode, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		s.t.Fatalf("status: %v", err)
	}
	return out
}

// awaitStatus polls the queue until ok accepts it, within bound.
func (s *service) awaitStatus(ctx context.Context, bound time.Duration, typ, resource string, ok func(lockapi.StatusResponse) bool) lockapi.StatusResponse {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		st := s.status(ctx, typ, resource)
		if ok(st) {
			return st
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("queue of %s:%s never reached the expected state within %v; last %+v", typ, resource, bound, st)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// post sends a raw JSON body and returns the status and body.
func (s *service) post(ctx context.Context, path, body string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.baseURL+path, strings.NewReader(body))
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rawLock is a /lock request on a bare TCP connection, for tests that cut
// the connection without a word.
type rawLock struct {
	conn net.Conn     // TLS over tcp when the cluster has client TLS
	tcp  *net.TCPConn // for closing without a word
	r    *bufio.Reader
}

func (s *service) rawLock(ctx context.Context, typ, resource, node string) *rawLock {
	s.t.Helper()
	u, _ := url.Parse(s.baseURL)
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		s.t.Fatalf("dial: %v", err)
	}
	tcp := conn.(*net.TCPConn)
	if s.tls != nil {
		conf := s.tls.Clone()
		conf.ServerName = u.Hostname()
		tc := tls.Client(conn, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			s.t.Fatalf("TLS handshake: %v", err)
		}
		conn = tc
	}
	s.t.Cleanup(func() { conn.Close() })
	body, _ := json.Marshal(lockapi.LockRequest{Type: typ, ResourceID: resource, NodeID: node})
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		lockapi.PathLock, u.Host, len(body), body)
	if _, err := conn.Write(req.Bytes()); err != nil {
		s.t.Fatalf("write request: %v", err)
	}
	r := bufio.NewReader(conn)
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(deadline)
	}
	statusLine, err := r.ReadString('\n')
	if err != nil || !strings.Contains(statusLine, " 200 ") {
		s.t.Fatalf("raw lock: status %q, %v", statusLine, err)
	}
	for { // headers
		line, err := r.ReadString('\n')
		if err != nil {
			s.t.Fatalf("raw lock headers: %v", err)
		}
		if line == "\r\n" {
			break
		}
	}
	return &rawLock{conn: conn, tcp: tcp, r: r}
}

// next returns the next event, skipping chunk framing and heartbeats.
func (rl *rawLock) next(t *testing.T) lockapi.Event {
	t.Helper()
	for {
		line, err := rl.r.ReadString('\n')
		if err != nil {
			t.Fatalf("raw lock stream: %v", err)
		}
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue // chunk sizes and blank heartbeats
		}
		var ev lockapi.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("raw lock event %q: %v", line, err)
		}
		return ev
	}
}

func (rl *rawLock) expect(t *testing.T, status string) lockapi.Event {
	t.Helper()
	ev := rl.next(t)
	if ev.Status != status {
		t.Fatalf("event %+v, want status %q", ev, status)
	}
	return ev
}

// unlock releases l reporting success and checks it was released.
func unlock(t *testing.T, ctx context.Context, l *lockclient.Lock) {
	t.Helper()
	released, err := l.Unlock(ctx, true, nil)
	if err != nil || !released {
		t.Fatalf("unlock: released=%v err=%v", released, err)
	}
}
