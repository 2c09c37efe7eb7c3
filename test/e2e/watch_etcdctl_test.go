package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// watchSyncInterval spaces the marker writes of waitWatching.
	watchSyncInterval = 100 * time.Millisecond
	// etcdctlExitTimeout bounds how long a watch process may take to exit
	// once it has no more reason to run.
	etcdctlExitTimeout = 10 * time.Second
)

// etcdctl's exit codes (go.etcd.io/etcd/pkg/v3/cobrautl).
const (
	etcdctlExitInvalidInput = 3
	etcdctlExitInterrupted  = 5
)

// ctlWatch is a running `etcdctl watch`: it runs until it is killed (or
// the server cancels its watch), so its stdout is read line by line as it
// comes and the test synchronises on those lines.
type ctlWatch struct {
	t     *testing.T
	ctx   context.Context
	args  []string
	stdin io.WriteCloser
	lines chan string
	// stderr is written by exec's copying goroutine and read only after
	// exited is closed.
	stderr bytes.Buffer
	exited chan struct{}
	// exitErr is cmd.Wait's result, read only after exited is closed.
	exitErr error
}

// startCtlWatch starts `etcdctl --endpoints=... watch args...` against s.
// The process is killed when the test ends.
func startCtlWatch(ctx context.Context, t *testing.T, s *server, args ...string) *ctlWatch {
	t.Helper()
	procCtx, kill := context.WithCancel(ctx)
	w := &ctlWatch{t: t, ctx: ctx, args: args, lines: make(chan string, 1024), exited: make(chan struct{})}
	cmd := s.cluster.Etcdctl().Command(procCtx, append([]string{"watch"}, args...)...)
	cmd.Stderr = &w.stderr
	cmd.WaitDelay = etcdctlExitTimeout
	// A watch outlives its server (it retries forever), so a crashed test
	// binary must take it along, as it does the servers.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("etcdctl watch stdin: %v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("etcdctl watch stdout: %v", err)
	}
	w.stdin = stdin
	if err := cmd.Start(); err != nil {
		kill()
		t.Fatalf("start etcdctl watch %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		// Every line is read before Wait, as exec requires of StdoutPipe;
		// once the process is being killed nobody reads them any more.
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			select {
			case w.lines <- lines.Text():
			case <-procCtx.Done():
			}
		}
		close(w.lines)
		w.exitErr = cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		kill()
		<-w.exited
	})
	return w
}

// next returns the next line of output. The process ending first fails
// the test with its stderr.
func (w *ctlWatch) next() string {
	w.t.Helper()
	select {
	case line, ok := <-w.lines:
		if !ok {
			<-w.exited
			w.t.Fatalf("etcdctl watch %s ended (%v) while a line was expected; stderr:\n%s", strings.Join(w.args, " "), w.exitErr, w.stderr.String())
		}
		return line
	case <-w.ctx.Done():
		w.t.Fatalf("etcdctl watch %s: no output line: %v", strings.Join(w.args, " "), w.ctx.Err())
	}
	return ""
}

// expect reads as many lines as want has and checks they are want.
func (w *ctlWatch) expect(want ...string) {
	w.t.Helper()
	got := make([]string, len(want))
	for i := range want {
		got[i] = w.next()
		if got[i] != want[i] {
			w.t.Fatalf("etcdctl watch %s printed\n%s\nwant\n%s", strings.Join(w.args, " "),
				strings.Join(got[:i+1], "\n"), strings.Join(want, "\n"))
		}
	}
}

// expectJSON reads one line of -w json output and checks it equals want
// once the IDs and the term, which differ between runs and targets, are
// replaced by ID (see normalizeIDs).
func (w *ctlWatch) expectJSON(want string) etcdctlWatchResponse {
	w.t.Helper()
	line := w.next()
	if got := normalizeIDs(line); got != want {
		w.t.Fatalf("etcdctl watch %s -w json printed\n%s\nwant\n%s", strings.Join(w.args, " "), got, want)
	}
	var resp etcdctlWatchResponse
	if err := json.Unmarshal([]byte(line), &resp); err != nil {
		w.t.Fatalf("etcdctl watch -w json printed a line that does not parse: %v\n%s", err, line)
	}
	if resp.Header.ClusterID == 0 || resp.Header.MemberID == 0 || resp.Header.RaftTerm == 0 {
		w.t.Fatalf("etcdctl watch -w json header has zero IDs or term: %+v", resp.Header)
	}
	return resp
}

// expectExit waits for the process to exit on its own, with no further
// output, and checks its exit code and stderr.
func (w *ctlWatch) expectExit(code int, stderr string) {
	w.t.Helper()
	select {
	case line, ok := <-w.lines:
		if ok {
			w.t.Fatalf("etcdctl watch %s printed %q, want no more output", strings.Join(w.args, " "), line)
		}
	case <-w.ctx.Done():
		w.t.Fatalf("etcdctl watch %s did not exit: %v", strings.Join(w.args, " "), w.ctx.Err())
	}
	<-w.exited
	got := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(w.exitErr, &exitErr):
		got = exitErr.ExitCode()
	case w.exitErr != nil:
		w.t.Fatalf("etcdctl watch %s: %v", strings.Join(w.args, " "), w.exitErr)
	}
	if got != code || w.stderr.String() != stderr {
		w.t.Fatalf("etcdctl watch %s exited with code %d and stderr %q, want %d and %q",
			strings.Join(w.args, " "), got, w.stderr.String(), code, stderr)
	}
}

// send writes one line to the interactive watch's stdin.
func (w *ctlWatch) send(line string) {
	w.t.Helper()
	if _, err := io.WriteString(w.stdin, line+"\n"); err != nil {
		w.t.Fatalf("etcdctl watch -i: write %q: %v", line, err)
	}
}

// waitWatching returns once the watch is registered on the server.
// etcdctl prints nothing when its watch is created, so the only proof is
// an event: key (inside the watched range) is put to "sync-1", "sync-2",
// ... once per interval until the output shows the latest value, and every
// line up to that one is consumed. The retries cover puts made before the
// watch existed; a value is matched as printed plainly or, in -w json
// output, base64-encoded.
func (w *ctlWatch) waitWatching(cli *clientv3.Client, key string) {
	w.t.Helper()
	tick := time.NewTicker(watchSyncInterval)
	defer tick.Stop()
	written := 0
	put := func() {
		written++
		mustPut(w.ctx, w.t, cli, key, fmt.Sprintf("sync-%d", written))
	}
	put()
	for {
		value := fmt.Sprintf("sync-%d", written)
		encoded := `"value":"` + base64.StdEncoding.EncodeToString([]byte(value)) + `"`
		select {
		case line, ok := <-w.lines:
			if !ok {
				<-w.exited
				w.t.Fatalf("etcdctl watch %s ended (%v) before its watch was seen; stderr:\n%s", strings.Join(w.args, " "), w.exitErr, w.stderr.String())
			}
			if line == value || strings.Contains(line, encoded) {
				return
			}
		case <-tick.C:
			put()
		case <-w.ctx.Done():
			w.t.Fatalf("etcdctl watch %s: watch not seen: %v", strings.Join(w.args, " "), w.ctx.Err())
		}
	}
}

// etcdctlWatchResponse mirrors what etcdctl -w json prints for a watch
// response: clientv3.WatchResponse marshalled as is, so its own fields keep
// Go names while the protobuf ones use their JSON names.
type etcdctlWatchResponse struct {
	Header etcdctlHeader `json:"Header"`
	Events []struct {
		Type   int        `json:"type"`
		Kv     etcdctlKV  `json:"kv"`
		PrevKv *etcdctlKV `json:"prev_kv"`
	} `json:"Events"`
	CompactRevision int64 `json:"CompactRevision"`
	Canceled        bool  `json:"Canceled"`
	Created         bool  `json:"Created"`
}

var volatileJSONFields = regexp.MustCompile(`"(cluster_id|member_id|raft_term)":[0-9]+`)

// normalizeIDs replaces the values of the header fields that differ
// between runs and targets, keeping the fields themselves.
func normalizeIDs(line string) string {
	return volatileJSONFields.ReplaceAllString(line, `"$1":ID`)
}

// jsonHeader is a normalized -w json header at revision rev; 0 leaves the
// revision out, as protobuf's JSON names omit zero values.
func jsonHeader(rev int64) string {
	if rev == 0 {
		return `{"cluster_id":ID,"member_id":ID,"raft_term":ID}`
	}
	return fmt.Sprintf(`{"cluster_id":ID,"member_id":ID,"revision":%d,"raft_term":ID}`, rev)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestEtcdctlWatchPrefix(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "/p/old", "before the watch")

	w := startCtlWatch(ctx, t, s, "--prefix", "/p")
	w.waitWatching(s.cli, "/p/sync")
	mustPut(ctx, t, s.cli, "/p/a", "1")
	mustPut(ctx, t, s.cli, "/q", "outside")
	mustPut(ctx, t, s.cli, "p", "outside")
	mustPut(ctx, t, s.cli, "/pa", "2") // a byte prefix, not a directory
	mustPut(ctx, t, s.cli, "/p/a", "value with spaces")
	if _, err := s.cli.Delete(ctx, "/p/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Delete(ctx, "/q"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Txn(ctx).Then(clientv3.OpPut("/o", "outside"), clientv3.OpPut("/p/b", "3"), clientv3.OpDelete("/p/old")).Commit(); err != nil {
		t.Fatal(err)
	}
	mustPut(ctx, t, s.cli, "/p/", "")
	w.expect(
		"PUT", "/p/a", "1",
		"PUT", "/pa", "2",
		"PUT", "/p/a", "value with spaces",
		"DELETE", "/p/a", "",
		"PUT", "/p/b", "3",
		"DELETE", "/p/old", "",
		"PUT", "/p/", "",
	)
}

func TestEtcdctlWatchRevAndCompaction(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "/h/a", "1")                  // 2
	mustPut(ctx, t, s.cli, "/h/b", "2")                  // 3
	mustPut(ctx, t, s.cli, "/x", "3")                    // 4
	if _, err := s.cli.Delete(ctx, "/h/a"); err != nil { // 5
		t.Fatal(err)
	}
	mustPut(ctx, t, s.cli, "/h/b", "22") // 6

	// History from revision 3 on, then live events.
	w := startCtlWatch(ctx, t, s, "--prefix", "/h", "--rev=3")
	w.expect("PUT", "/h/b", "2", "DELETE", "/h/a", "", "PUT", "/h/b", "22")
	mustPut(ctx, t, s.cli, "/h/c", "4") // 7
	w.expect("PUT", "/h/c", "4")

	if _, err := s.cli.Compact(ctx, 5); err != nil {
		t.Fatal(err)
	}
	// From the compacted revision itself: still there.
	w = startCtlWatch(ctx, t, s, "--prefix", "/h", "--rev=5")
	w.expect("DELETE", "/h/a", "", "PUT", "/h/b", "22", "PUT", "/h/c", "4")

	// From below it: the server cancels the watch, etcdctl says why on
	// stderr and exits with ExitInterrupted.
	const compactedStderr = "watch was canceled (etcdserver: mvcc: required revision has been compacted)\n" +
		"Error: watch is canceled by the server\n"
	w = startCtlWatch(ctx, t, s, "--prefix", "/h", "--rev=4")
	w.expectExit(etcdctlExitInterrupted, compactedStderr)

	// In JSON the cancellation is printed too, with the compact revision
	// and a header without a revision.
	w = startCtlWatch(ctx, t, s, "--prefix", "/h", "--rev=2", "-w", "json")
	resp := w.expectJSON(`{"Header":` + jsonHeader(0) + `,"Events":[],"CompactRevision":5,"Canceled":true,"Created":false}`)
	if resp.CompactRevision != 5 || !resp.Canceled {
		t.Fatalf("compacted watch -w json: %+v", resp)
	}
	w.expectExit(etcdctlExitInterrupted, compactedStderr)
}

func TestEtcdctlWatchPrevKV(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "/k/old", "o")

	w := startCtlWatch(ctx, t, s, "--prefix", "/k/", "--prev-kv")
	w.waitWatching(s.cli, "/k/sync")
	first := currentRevision(ctx, t, s.cli) + 1
	mustPut(ctx, t, s.cli, "/k/a", "1")
	mustPut(ctx, t, s.cli, "/k/a", "2")
	if _, err := s.cli.Delete(ctx, "/k/a"); err != nil {
		t.Fatal(err)
	}
	mustPut(ctx, t, s.cli, "/k/a", "3")
	if _, err := s.cli.Txn(ctx).Then(clientv3.OpPut("/k/old", "n"), clientv3.OpDelete("/k/missing")).Commit(); err != nil {
		t.Fatal(err)
	}
	// An event prints its type, then the previous key and value when there
	// is one, then the key and value.
	want := []string{
		"PUT", "/k/a", "1",
		"PUT", "/k/a", "1", "/k/a", "2",
		"DELETE", "/k/a", "2", "/k/a", "",
		"PUT", "/k/a", "3",
		"PUT", "/k/old", "o", "/k/old", "n",
	}
	w.expect(want...)

	// The same events read back from history carry the same prev_kv.
	history := startCtlWatch(ctx, t, s, "--prefix", "/k/", "--prev-kv", fmt.Sprintf("--rev=%d", first))
	history.expect(want...)
}

func TestEtcdctlWatchJSON(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	w := startCtlWatch(ctx, t, s, "--prefix", "/j/", "-w", "json")
	w.waitWatching(s.cli, "/j/sync")
	syncRev := currentRevision(ctx, t, s.cli)
	mustPut(ctx, t, s.cli, "/j/a", "1") // syncRev+1
	if _, err := s.cli.Txn(ctx).Then(clientv3.OpPut("/j/b", "2"), clientv3.OpDelete("/j/a"), clientv3.OpPut("/x", "3")).Commit(); err != nil {
		t.Fatal(err)
	} // syncRev+2

	// One line per response: a PUT event leaves its type out (it is 0),
	// a DELETE's kv has only the key and the deleting revision.
	r1, r2 := syncRev+1, syncRev+2
	putA := fmt.Sprintf(`{"kv":{"key":"%s","create_revision":%d,"mod_revision":%d,"version":1,"value":"%s"}}`, b64("/j/a"), r1, r1, b64("1"))
	putB := fmt.Sprintf(`{"kv":{"key":"%s","create_revision":%d,"mod_revision":%d,"version":1,"value":"%s"}}`, b64("/j/b"), r2, r2, b64("2"))
	delA := fmt.Sprintf(`{"type":1,"kv":{"key":"%s","mod_revision":%d}}`, b64("/j/a"), r2)
	tail := `,"CompactRevision":0,"Canceled":false,"Created":false}`
	resp := w.expectJSON(`{"Header":` + jsonHeader(r1) + `,"Events":[` + putA + `]` + tail)
	if resp.Header.Revision != r1 || len(resp.Events) != 1 || string(resp.Events[0].Kv.Value) != "1" {
		t.Fatalf("first response: %+v", resp)
	}
	resp = w.expectJSON(`{"Header":` + jsonHeader(r2) + `,"Events":[` + putB + `,` + delA + `]` + tail)
	if resp.Header.Revision != r2 || len(resp.Events) != 2 || resp.Events[1].Type != 1 || string(resp.Events[1].Kv.Key) != "/j/a" {
		t.Fatalf("transaction response: %+v", resp)
	}

	// Read from history, the same events come in one response at the
	// current revision.
	history := startCtlWatch(ctx, t, s, "--prefix", "/j/", "-w", "json", fmt.Sprintf("--rev=%d", r1))
	history.expectJSON(`{"Header":` + jsonHeader(r2) + `,"Events":[` + putA + `,` + putB + `,` + delA + `]` + tail)
}

func TestEtcdctlWatchProgressNotify(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{ExtraFlags: []string{"--watch-progress-notify-interval=100ms"}})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "other", "1") // 2

	// etcdctl prints "progress notify: <revision>" for a notification in
	// every output format; -w json follows it with the response itself.
	plain := startCtlWatch(ctx, t, s, "/pn", "--progress-notify")
	inJSON := startCtlWatch(ctx, t, s, "/pn", "--progress-notify", "-w", "json")
	plain.expect("progress notify: 2")
	inJSON.expect("progress notify: 2")
	emptyAt := func(rev int64) string {
		return `{"Header":` + jsonHeader(rev) + `,"Events":[],"CompactRevision":0,"Canceled":false,"Created":false}`
	}
	inJSON.expectJSON(emptyAt(2))

	// Both watches are registered (they were notified), so they see the
	// put; notifications at revision 2 may still come before it, and the
	// first one after it is at revision 3.
	mustPut(ctx, t, s.cli, "/pn", "v") // 3
	putAt3 := fmt.Sprintf(`{"Header":%s,"Events":[{"kv":{"key":"%s","create_revision":3,"mod_revision":3,"version":1,"value":"%s"}}],"CompactRevision":0,"Canceled":false,"Created":false}`,
		jsonHeader(3), b64("/pn"), b64("v"))
	skipProgressAt := func(w *ctlWatch, rev int64, isJSON bool) string {
		t.Helper()
		for {
			line := w.next()
			if line != fmt.Sprintf("progress notify: %d", rev) {
				return line
			}
			if isJSON {
				w.expectJSON(emptyAt(rev))
			}
		}
	}
	if line := skipProgressAt(plain, 2, false); line != "PUT" {
		t.Fatalf("etcdctl watch --progress-notify printed %q, want PUT", line)
	}
	plain.expect("/pn", "v", "progress notify: 3")
	if line := skipProgressAt(inJSON, 2, true); normalizeIDs(line) != putAt3 {
		t.Fatalf("etcdctl watch --progress-notify -w json printed\n%s\nwant\n%s", normalizeIDs(line), putAt3)
	}
	inJSON.expect("progress notify: 3")
	resp := inJSON.expectJSON(emptyAt(3))
	if resp.Header.Revision != 3 || len(resp.Events) != 0 || resp.Canceled || resp.Created {
		t.Fatalf("progress notification -w json: %+v", resp)
	}
}

func TestEtcdctlWatchInteractive(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "/other", "1") // 2

	w := startCtlWatch(ctx, t, s, "-i")
	// `watch` returns once the server created the watch, and a progress
	// request on the same stream is answered after it: its line proves
	// the watch is in place.
	w.send("watch --prefix /i/")
	w.send("progress")
	w.expect("progress notify: 2")
	mustPut(ctx, t, s.cli, "/i/a", "1") // 3
	w.expect("PUT", "/i/a", "1")

	// Each line's flags apply to that watch only; a progress request
	// reaches every watch of the stream, each printing its own line.
	w.send("watch /other --prev-kv")
	w.send("progress")
	w.expect("progress notify: 3", "progress notify: 3")
	mustPut(ctx, t, s.cli, "/other", "2") // 4
	w.expect("PUT", "/other", "1", "/other", "2")
	mustPut(ctx, t, s.cli, "/i/b", "x") // 5
	w.expect("PUT", "/i/b", "x")

	// History through a later line's --rev.
	w.send("watch --rev=3 /i/a")
	w.expect("PUT", "/i/a", "1")

	// A bad line is reported on stderr and skipped; end of input ends
	// etcdctl with ExitInvalidInput.
	w.send("unwatch /i/a")
	w.send("progress")
	w.expect("progress notify: 5", "progress notify: 5", "progress notify: 5")
	if err := w.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	w.expectExit(etcdctlExitInvalidInput,
		"Invalid command unwatch /i/a (only support watch)\nError: error reading watch request line: EOF\n")
}
