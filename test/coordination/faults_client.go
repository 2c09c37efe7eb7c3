package coordination

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/metastore-io/metastore/pkg/lockapi"
	"github.com/metastore-io/metastore/test/framework"
)

// The faults on the clients' side: a holder whose host vanishes, and a
// holder that stops reading its stream. Each runs a holder of its own on
// one of the workload's HTTP locks, waits in line with the workload's
// contenders until it holds the lock, then abandons it without a word;
// the workload's next waiter must be granted the lock within the bound
// internal/lockservice documents for that case (RuleRelease).
const (
	// VanishBound is the documented bound for a vanished client host's
	// lock to go to the next waiter (internal/lockservice: the kernel's
	// TCP_USER_TIMEOUT, the 10 s WriteTimeout, counted from the first
	// heartbeat left unacknowledged, up to the 1 s Heartbeat later, plus
	// 1 s for its last check and the handover: 12 s; measured 11.0 s),
	// plus 1 s for a loaded machine.
	VanishBound = 12*time.Second + time.Second
	// StopReadingBound is the documented bound for a holder that stops
	// reading with its socket open (30 s: the padded heartbeats fill the
	// socket's buffers, then the blocked write fails after WriteTimeout;
	// measured 18.6 s), plus 5 s for a loaded machine.
	StopReadingBound = 30*time.Second + 5*time.Second
	// lostWait is how long past the next grant a vanished holder may
	// still say it lost the lock, so that the history shows how late it
	// was rather than only that it was (the overlap rule judges it).
	lostWait = 5 * time.Second
)

// preparedFault is a Fault that sets itself up on the cluster before the
// workload starts, or says why it cannot run here (skip non-empty): the
// runner then leaves it out and logs why.
type preparedFault interface {
	Fault
	prepare(ctx context.Context, e *Env) (skip string, err error)
}

// skipClientTLS says why a fault with a client of its own that speaks
// plain HTTP cannot run on this cluster, if it cannot.
func skipClientTLS(c *framework.Cluster) string {
	if tc := c.TLS(); tc != nil && tc.Client {
		return "the cluster has client TLS (E2E_TLS): the fault's client speaks plain HTTP, and the member's certificate does not name a client host link's address"
	}
	return ""
}

// vanishedHost runs a child holder (child.go) in a client host's network
// namespace (framework.ClientHost), through a client URL the first
// member also listens on, on the namespace's link; once the child holds
// the lock, the link goes down: no FIN, no RST, the member's packets
// dropped. The child must tell itself it lost the lock (lockclient's
// deadline) before the next waiter is granted it (RuleOverlap), and that
// grant must come within VanishBound (RuleRelease). The link comes back
// up for the next injection.
type vanishedHost struct {
	host   *framework.ClientHost
	member *framework.Member
	url    string // the member's client URL on the host's link
	n      int
}

func (*vanishedHost) Name() string { return "vanished-host" }

func (f *vanishedHost) prepare(ctx context.Context, e *Env) (string, error) {
	if os.Geteuid() != 0 {
		return "a client host is a network namespace: creating one needs root", nil
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "a client host needs the ip command (iproute2)", nil
	}
	if why := skipClientTLS(e.Cluster); why != "" {
		return why, nil
	}
	f.host = framework.NewClientHost(e.T)
	f.member = e.Cluster.Members()[0]
	u, err := f.host.ServeFrom(ctx, e.T, f.member)
	if err != nil {
		return "", err
	}
	f.url = u
	return "", nil
}

func (f *vanishedHost) Inject(ctx context.Context, e *Env) error {
	f.n++
	res := fmt.Sprintf("r%d", f.n%resources)
	node := fmt.Sprintf("http-vanishing%d@%s", f.n, f.member.Name())
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("the test binary: %w", err)
	}
	child := f.host.Command(ctx, exe)
	child.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{f.url, lockType, res, node}, " "))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return fmt.Errorf("child holder: %w", err)
	}
	if err := child.Start(); err != nil {
		return fmt.Errorf("start the child holder: %w", err)
	}
	relay := relayChild(e.Hist, string(APIHTTP)+"/"+res, node, out)
	defer func() {
		_ = child.Process.Kill()
		relay.finish()
		_ = child.Wait()
	}()
	var hold *Hold
	select {
	case hold = <-relay.granted:
	case <-relay.done:
		e.T.Logf("fault: %s: the child holder ended without the lock; nothing to strike", node)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	e.aimed = append(e.aimed, hold.Call)
	if err := f.host.Vanish(); err != nil {
		return err
	}
	gone := time.Now()
	e.T.Logf("fault: %s holds %s (token %d) from a client host whose link just went down", node, hold.Resource, hold.Token)
	e.Hist.Abandoned(hold, f.Name(), gone, VanishBound)
	if next, ok := e.awaitNextGrant(ctx, hold, gone, VanishBound+lostWait); ok {
		select {
		case <-relay.lost:
		case <-time.After(time.Until(next.Granted.Add(lostWait))):
			e.T.Logf("fault: %s was not told it lost the lock %v after %s was granted it", node, lostWait, next.Client)
		case <-ctx.Done():
		}
	}
	return f.host.Reconnect()
}

// awaitNextGrant waits, at most limit after from, until the lock of hold
// is granted to another client after from, and returns that belief.
func (e *Env) awaitNextGrant(ctx context.Context, hold *Hold, from time.Time, limit time.Duration) (Hold, bool) {
	ctx, cancel := context.WithDeadline(ctx, from.Add(limit))
	defer cancel()
	for {
		if next, ok := e.Hist.nextGrant(hold.Resource, hold.Client, from); ok {
			e.T.Logf("fault: %s granted %s (token %d) %v after %s abandoned it", next.Resource, next.Client, next.Token,
				next.Granted.Sub(from).Round(time.Millisecond), hold.Client)
			return next, true
		}
		if ctx.Err() != nil {
			e.T.Logf("fault: nobody granted %s within %v after %s abandoned it", hold.Resource, limit, hold.Client)
			return Hold{}, false
		}
		pause(ctx, 20*time.Millisecond)
	}
}

// stopsReading runs a raw holder (a /lock request on a bare TCP
// connection) on one member; once it holds the lock it reads its stream
// no more, its socket open. It cannot be told it lost the lock, so its
// belief is taken to end when it stopped reading: fencing it after that
// is the protected resource's job. The next waiter must be granted the
// lock within StopReadingBound (RuleRelease); then the holder makes one
// late write with its token, which the fenced store must refuse
// (RuleFencing).
type stopsReading struct{ n int }

func (*stopsReading) Name() string { return "stops-reading" }

func (*stopsReading) prepare(_ context.Context, e *Env) (string, error) {
	return skipClientTLS(e.Cluster), nil
}

func (f *stopsReading) Inject(ctx context.Context, e *Env) error {
	f.n++
	ms := e.Cluster.Members()
	m := ms[f.n%len(ms)]
	res := string(APIHTTP) + "/" + fmt.Sprintf("r%d", (f.n+1)%resources)
	node := fmt.Sprintf("http-deaf%d@%s", f.n, m.Name())
	conn, hold, err := rawHold(ctx, e.Hist, m.ClientURL(), res, node)
	if err != nil {
		return err
	}
	defer conn.Close()
	if hold == nil {
		e.T.Logf("fault: %s got no lock; nothing to strike", node)
		return nil
	}
	e.Hist.EndHold(hold, EndStopped, "stopped reading its stream, its socket open")
	stopped := time.Now()
	e.aimed = append(e.aimed, hold.Call)
	e.T.Logf("fault: %s holds %s (token %d) and stops reading", node, res, hold.Token)
	e.Hist.Abandoned(hold, f.Name(), stopped, StopReadingBound)
	if _, ok := e.awaitNextGrant(ctx, hold, stopped, StopReadingBound+lostWait); ok {
		accepted := e.Hist.LateWrite(hold)
		e.T.Logf("fault: %s's late write with token %d: accepted=%v", node, hold.Token, accepted)
	}
	return nil
}

// rawHold sends node's /lock request for res (API "/" name) to the member
// at clientURL on a bare connection, recording the call and every read of
// its stream, and reads until the lock is granted (the belief) or the
// stream ends without it (nil), within lockWait. An error is a connection
// the harness could not make.
func rawHold(ctx context.Context, hist *History, clientURL, res, node string) (net.Conn, *Hold, error) {
	u, err := url.Parse(clientURL)
	if err != nil {
		return nil, nil, fmt.Errorf("client URL %q: %w", clientURL, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", u.Host, err)
	}
	_, name, _ := strings.Cut(res, "/")
	body, _ := json.Marshal(lockapi.LockRequest{Type: lockType, ResourceID: name, NodeID: node})
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		lockapi.PathLock, u.Host, len(body), body)
	call := hist.StartCall(res, node, APIHTTP, OpLock)
	_ = conn.SetReadDeadline(time.Now().Add(lockWait))
	if _, err := conn.Write(req.Bytes()); err != nil {
		hist.EndCall(call, err)
		return conn, nil, nil
	}
	token, err := readUntilGranted(bufio.NewReader(conn), hist, call)
	if err != nil {
		hist.EndCall(call, err)
		return conn, nil, nil
	}
	return conn, hist.Grant(call, token, 0), nil
}

// readUntilGranted reads a /lock response, each line an answer of call,
// until the acquired event, and returns its token.
func readUntilGranted(r *bufio.Reader, hist *History, call *Call) (int64, error) {
	status, err := r.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("raw lock: %w", err)
	}
	hist.Answer(call)
	if !strings.Contains(status, " 200 ") {
		return 0, fmt.Errorf("raw lock: status %q", strings.TrimSpace(status))
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, fmt.Errorf("raw lock stream: %w", err)
		}
		hist.Answer(call)
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue // headers, chunk sizes, blank heartbeats
		}
		var ev lockapi.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return 0, fmt.Errorf("raw lock event %q: %w", line, err)
		}
		switch ev.Status {
		case lockapi.StatusQueued:
			hist.Queued(call)
		case lockapi.StatusAcquired:
			return ev.Token, nil
		default:
			return 0, errors.New("raw lock: " + line)
		}
	}
}
