package lockservice

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/metastore-io/metastore/pkg/lockapi"
	"github.com/metastore-io/metastore/pkg/lockclient"
	"github.com/metastore-io/metastore/test/framework"
)

// TestLockService runs the single-member scenarios on one member.
func TestLockService(t *testing.T) {
	requireMetaStore(t)
	cluster := framework.NewCluster(t, framework.ClusterConfig{})
	s := newService(t, cluster, cluster.Member(0))
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, ctx context.Context, s *service)
	}{
		{"FIFOAndIncreasingTokens", testFIFO},
		{"ResourcesAreIndependent", testIndependence},
		{"UnlockHandsOverAtOnce", testUnlockHandsOver},
		{"HolderProcessKilled", testHolderKilled},
		{"HolderSocketClosed", testHolderSocketClosed},
		{"WaiterSocketClosedLeavesQueue", testWaiterLeaves},
		{"UnlockByNonHolderIs403", testNotHolder},
		{"MissingParametersAre400", testBadParameters},
		{"SameNodeKeepsItsPlace", testIdempotent},
		{"NoWaitIs409", testNoWait},
		{"NoWaitKeepsQueuedPlace", testNoWaitKeepsQueuedPlace},
		{"NoWaitByHolderChangesNothing", testNoWaitByHolder},
		{"ColonNamesAreDistinct", testColonNames},
		{"CallbacksAroundCriticalSection", testCallbacks},
		{"MetricsCountWhatHappened", testMetrics}, // last: counts the others
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			st := *s
			st.t = t
			tc.run(t, ctx, &st)
		})
	}
}

// testFIFO: waiters get the lock in the order they queued, and each
// holder's fencing token is larger than the last.
func testFIFO(t *testing.T, ctx context.Context, s *service) {
	const waiters = 8
	holder := s.lock(ctx, "fifo", "r", "holder")
	var queue []*waiter
	for i := range waiters {
		w := s.enqueue(ctx, "fifo", "r", fmt.Sprintf("node-%d", i))
		queue = append(queue, w)
	}
	st := s.status(ctx, "fifo", "r")
	if st.Holder == nil || st.Holder.NodeID != "holder" || len(st.Waiters) != waiters {
		t.Fatalf("status %+v, want holder and %d waiters", st, waiters)
	}
	last := holder.Token()
	current := holder
	for i, w := range queue {
		unlock(t, ctx, current)
		current = w.acquired(t, ctx)
		for _, later := range queue[i+1:] {
			if !later.pending() {
				t.Fatalf("%s got the lock before %s, which queued earlier", later.node, w.node)
			}
		}
		if current.Token() <= last {
			t.Fatalf("%s's token %d is not above the previous holder's %d", w.node, current.Token(), last)
		}
		last = current.Token()
	}
	unlock(t, ctx, current)
}

// testIndependence: holding one resource does not block another, of the
// same type or another type.
func testIndependence(t *testing.T, ctx context.Context, s *service) {
	a := s.lock(ctx, "ind", "r1", "n1")
	for _, r := range [][2]string{{"ind", "r2"}, {"other", "r1"}} {
		l, err := s.client.Lock(ctx, lockclient.Request{Type: r[0], ResourceID: r[1], NodeID: "n2", NoWait: true})
		if err != nil {
			t.Fatalf("%s:%s while ind:r1 is held: %v", r[0], r[1], err)
		}
		unlock(t, ctx, l)
	}
	unlock(t, ctx, a)
}

// testUnlockHandsOver: /unlock gives the lock to the next waiter while the
// holder's stream is still open, so the handover comes from the unlock,
// not from a disconnect or an expiry; the holder's stream says released.
func testUnlockHandsOver(t *testing.T, ctx context.Context, s *service) {
	holder := s.rawLock(ctx, "handover", "r", "h")
	ev := holder.expect(t, lockapi.StatusAcquired)
	w := s.enqueue(ctx, "handover", "r", "w")
	code, body := s.post(ctx, lockapi.PathUnlock,
		fmt.Sprintf(`{"Type":"handover","ResourceID":"r","NodeID":"h","Success":true,"Token":%d}`, ev.Token))
	if code != 200 || !strings.Contains(body, `"released":true`) {
		t.Fatalf("unlock: %d %s", code, body)
	}
	next := w.acquired(t, ctx)
	if next.Token() <= ev.Token {
		t.Fatalf("token %d after %d", next.Token(), ev.Token)
	}
	if end := holder.next(t); end.Status != lockapi.StatusReleased {
		t.Fatalf("holder's stream ended with %+v, want released", end)
	}
	unlock(t, ctx, next)
}

// testHolderKilled: the holder is another process, killed with SIGKILL
// while it holds the lock; the waiter gets the lock within the bound.
func testHolderKilled(t *testing.T, ctx context.Context, s *service) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.CommandContext(ctx, exe)
	startHolder(t, child, append([]string{s.baseURL, "killed", "r", "child"}, s.tlsArgs...))
	w := s.enqueue(ctx, "killed", "r", "survivor")
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	bound, cancel := context.WithTimeout(ctx, releaseBound)
	defer cancel()
	unlock(t, ctx, w.acquired(t, bound))
}

// startHolder starts child, the test binary as a lock holder (runChild)
// for spec, and returns its output once it holds the lock. The child is
// killed when t ends.
func startHolder(t *testing.T, child *exec.Cmd, spec []string) *bufio.Reader {
	t.Helper()
	child.Env = append(os.Environ(), childEnv+"="+strings.Join(spec, " "))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "token ") {
		t.Fatalf("child: %q %v", line, err)
	}
	return r
}

// testHolderSocketClosed: the holder closes its socket without a word,
// once gracefully (FIN) and once abortively (RST); the waiter gets the
// lock within the bound each time.
func testHolderSocketClosed(t *testing.T, ctx context.Context, s *service) {
	for _, abort := range []bool{false, true} {
		resource := fmt.Sprintf("abort-%v", abort)
		holder := s.rawLock(ctx, "closed", resource, "h")
		holder.expect(t, lockapi.StatusAcquired)
		w := s.enqueue(ctx, "closed", resource, "w")
		if abort {
			_ = holder.tcp.SetLinger(0)
		}
		holder.tcp.Close() // no TLS close_notify either
		bound, cancel := context.WithTimeout(ctx, releaseBound)
		unlock(t, ctx, w.acquired(t, bound))
		cancel()
	}
}

// testWaiterLeaves: a waiter whose socket is closed leaves the queue, and
// the unlock then hands the lock to the waiter behind it.
func testWaiterLeaves(t *testing.T, ctx context.Context, s *service) {
	holder := s.lock(ctx, "leave", "r", "h")
	gone := s.rawLock(ctx, "leave", "r", "gone")
	gone.expect(t, lockapi.StatusQueued)
	w := s.enqueue(ctx, "leave", "r", "w")
	gone.tcp.Close()
	s.awaitStatus(ctx, releaseBound, "leave", "r", func(st lockapi.StatusResponse) bool {
		for _, p := range st.Waiters {
			if p.NodeID == "gone" {
				return false
			}
		}
		return len(st.Waiters) == 1 && st.Waiters[0].NodeID == "w"
	})
	unlock(t, ctx, holder)
	unlock(t, ctx, w.acquired(t, ctx))
}

// testNotHolder: unlock by a waiter, by a stranger and with a wrong token
// is refused with 403 and releases nothing.
func testNotHolder(t *testing.T, ctx context.Context, s *service) {
	holder := s.lock(ctx, "forbid", "r", "h")
	w := s.enqueue(ctx, "forbid", "r", "w")
	for _, body := range []string{
		`{"Type":"forbid","ResourceID":"r","NodeID":"w","Success":true}`,
		`{"Type":"forbid","ResourceID":"r","NodeID":"stranger","Success":true}`,
		fmt.Sprintf(`{"Type":"forbid","ResourceID":"r","NodeID":"h","Success":true,"Token":%d}`, holder.Token()+1000),
	} {
		code, resp := s.post(ctx, lockapi.PathUnlock, body)
		if code != 403 || !strings.Contains(resp, `"released":false`) {
			t.Fatalf("unlock %s: %d %s, want 403 released=false", body, code, resp)
		}
	}
	if st := s.status(ctx, "forbid", "r"); st.Holder == nil || st.Holder.NodeID != "h" || !w.pending() {
		t.Fatalf("a refused unlock changed the queue: %+v", st)
	}
	unlock(t, ctx, holder)
	unlock(t, ctx, w.acquired(t, ctx))
}

// testBadParameters: each missing parameter of /lock and /unlock, a body
// that is not JSON and a wrong method are refused.
func testBadParameters(t *testing.T, ctx context.Context, s *service) {
	for _, tc := range []struct{ path, body, missing string }{
		{lockapi.PathLock, `{"ResourceID":"r","NodeID":"n"}`, "Type"},
		{lockapi.PathLock, `{"Type":"t","NodeID":"n"}`, "ResourceID"},
		{lockapi.PathLock, `{"Type":"t","ResourceID":"r"}`, "NodeID"},
		{lockapi.PathUnlock, `{"ResourceID":"r","NodeID":"n","Success":true}`, "Type"},
		{lockapi.PathUnlock, `{"Type":"t","NodeID":"n","Success":true}`, "ResourceID"},
		{lockapi.PathUnlock, `{"Type":"t","ResourceID":"r","Success":true}`, "NodeID"},
		{lockapi.PathUnlock, `{"Type":"t","ResourceID":"r","NodeID":"n"}`, "Success"},
		{lockapi.PathLock, `not json`, "JSON"},
		{lockapi.PathLock, ``, "empty body"},
	} {
		code, body := s.post(ctx, tc.path, tc.body)
		if code != 400 || !strings.Contains(body, tc.missing) {
			t.Errorf("POST %s %s: %d %s, want 400 naming %s", tc.path, tc.body, code, body, tc.missing)
		}
	}
	resp, err := httpGet(ctx, s.http, s.baseURL+lockapi.PathLock)
	if err != nil || resp != 405 {
		t.Errorf("GET /lock: %d %v, want 405", resp, err)
	}
}

// testIdempotent: the same node asking again while it holds the lock gets
// the same place and token, not a second place behind itself; the older
// request is told it was superseded.
func testIdempotent(t *testing.T, ctx context.Context, s *service) {
	first := s.rawLock(ctx, "again", "r", "n")
	ev := first.expect(t, lockapi.StatusAcquired)
	again := s.lock(ctx, "again", "r", "n")
	if again.Token() != ev.Token {
		t.Fatalf("asking again gave token %d, want the same place %d", again.Token(), ev.Token)
	}
	first.expect(t, lockapi.StatusSuperseded)
	if st := s.status(ctx, "again", "r"); st.Holder == nil || len(st.Waiters) != 0 {
		t.Fatalf("status %+v, want one place", st)
	}
	unlock(t, ctx, again)
}

// testNoWait: a NoWait request for a held resource gets 409 with its
// position and leaves no place behind.
func testNoWait(t *testing.T, ctx context.Context, s *service) {
	holder := s.lock(ctx, "nowait", "r", "h")
	_, err := s.client.Lock(ctx, lockclient.Request{Type: "nowait", ResourceID: "r", NodeID: "n", NoWait: true})
	var status *lockclient.StatusError
	if !asStatus(err, &status) || status.Code != 409 || status.Position != 1 {
		t.Fatalf("NoWait on a held lock: %v, want 409 at position 1", err)
	}
	if st := s.status(ctx, "nowait", "r"); len(st.Waiters) != 0 {
		t.Fatalf("NoWait left a place: %+v", st)
	}
	unlock(t, ctx, holder)
}

// testCallbacks: Do asks ShouldSkipOperation first, runs the operation
// under the lock, then UpdateRefCount, and reports the outcome.
func testCallbacks(t *testing.T, ctx context.Context, s *service) {
	var trace []string
	skip := true
	c, err := lockclient.New(lockclient.Config{Endpoints: []string{s.baseURL}, HTTPClient: s.http, Callbacks: lockclient.Callbacks{
		ShouldSkipOperation: func(context.Context, lockclient.Request) (bool, error) {
			trace = append(trace, "skip?")
			return skip, nil
		},
		UpdateRefCount: func(context.Context, lockclient.Request) error {
			trace = append(trace, "refcount")
			return nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	req := lockclient.Request{Type: "cb", ResourceID: "r", NodeID: "n"}
	op := func(_ context.Context, l *lockclient.Lock) error {
		trace = append(trace, fmt.Sprintf("op(held=%v)", l.Err() == nil))
		return nil
	}
	if skipped, err := c.Do(ctx, req, op); !skipped || err != nil {
		t.Fatalf("Do with skip: skipped=%v err=%v", skipped, err)
	}
	skip = false
	if skipped, err := c.Do(ctx, req, op); skipped || err != nil {
		t.Fatalf("Do: skipped=%v err=%v", skipped, err)
	}
	if got, want := strings.Join(trace, ","), "skip?,skip?,op(held=true),refcount"; got != want {
		t.Fatalf("calls %s, want %s", got, want)
	}
	if st := s.status(ctx, "cb", "r"); st.Holder != nil {
		t.Fatalf("Do left the lock held: %+v", st)
	}
}

// testMetrics: after the scenarios above, the metastore_lock_* metrics
// count acquisitions, waits, releases by unlock and by disconnect,
// outcomes and refused requests; a failed outcome is counted as such.
func testMetrics(t *testing.T, ctx context.Context, s *service) {
	l := s.lock(ctx, "metrics", "r", "n")
	if released, err := l.Unlock(ctx, false, errors.New("disk full")); err != nil || !released {
		t.Fatalf("unlock with a failed outcome: %v, %v", released, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.baseURL+"/metrics", nil)
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{
		"metastore_lock_acquisitions_total ",
		"metastore_lock_wait_seconds_count ",
		"metastore_lock_hold_seconds_count ",
		`metastore_lock_releases_total{reason="unlock"} `,
		`metastore_lock_releases_total{reason="disconnect"} `,
		`metastore_lock_waits_abandoned_total{reason="disconnect"} `,
		`metastore_lock_outcomes_total{outcome="success"} `,
		`metastore_lock_outcomes_total{outcome="failure"} `,
		`metastore_lock_requests_failed_total{code="400"} `,
		`metastore_lock_requests_failed_total{code="403"} `,
		`metastore_lock_requests_failed_total{code="409"} `,
	} {
		i := strings.Index(string(body), "\n"+series)
		if i < 0 {
			t.Errorf("no %s in /metrics", series)
			continue
		}
		value := strings.Fields(string(body)[i+1+len(series):])[0]
		if value == "0" {
			t.Errorf("%s is 0 after the scenarios", series)
		}
	}
}
