package sdk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/pkg/concurrency/lock"
)

// fencingChildEnv, when set, makes the test binary run fencingChild
// instead of the tests. Its value is "endpoint prefix resource".
const fencingChildEnv = "SDK_FENCING_CHILD"

// fencingChild is the lock holder of testFencingStoppedProcess, run as a
// child process so that SIGSTOP freezes all of it, lease renewal included.
// Protocol on stdout: "token N" once it holds the lock; then, after a line
// on stdin, "guard ok|lost|error: ..." for a Guard.Do write and "raw
// true|false" for a raw Txn under the guard's comparison.
func fencingChild(spec string) int {
	fields := strings.Fields(spec)
	if len(fields) != 3 {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", fencingChildEnv, spec)
		return 2
	}
	endpoint, prefix, resource := fields[0], fields[1], fields[2]
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cli.Close()
	l, err := lock.NewLocker(lock.Config{Client: cli, Prefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	h, err := l.Lock(ctx, "job", lock.WithTTL(shortTTL*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("token %d\n", h.FencingToken())
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch _, err := h.Guard().Do(ctx, clientv3.OpPut(resource, "child")); {
	case err == nil:
		fmt.Println("guard ok")
	case errors.Is(err, lock.ErrOwnershipLost):
		fmt.Println("guard lost")
	default:
		fmt.Printf("guard error: %v\n", err)
	}
	raw, err := cli.Txn(ctx).If(h.Guard().Cmp()).Then(clientv3.OpPut(resource, "child-raw")).Commit()
	if err != nil {
		fmt.Printf("raw error: %v\n", err)
		return 1
	}
	fmt.Printf("raw %v\n", raw.Succeeded)
	return 0
}

// testFencingStoppedProcess: the holder's whole process is frozen with
// SIGSTOP past its TTL; another process takes the lock and writes; the
// thawed holder's guarded writes are refused.
func testFencingStoppedProcess(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t) + "/"
	resource := keyPrefix(t) + "-resource"

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fencingChildEnv+"="+strings.Join([]string{e.endpoint(), pfx, resource}, " "))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = &testLogWriter{t: t, prefix: "fencing child: "}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stdoutPipe)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	readLine := func(what string) string {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("child exited before reporting %s", what)
			}
			return line
		case <-ctx.Done():
			t.Fatalf("waiting for the child's %s: %v", what, ctx.Err())
		}
		return ""
	}

	var childToken int64
	if _, err := fmt.Sscanf(readLine("token"), "token %d", &childToken); err != nil {
		t.Fatalf("child token line: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next, err := newLocker(t, e.newClient(t), pfx).Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unlock(ctx)
	if next.FencingToken() <= childToken {
		t.Fatalf("new holder's token %d not above the frozen holder's %d", next.FencingToken(), childToken)
	}
	if _, err := next.Guard().Do(ctx, clientv3.OpPut(resource, "parent")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	if got := readLine("guarded write"); got != "guard lost" {
		t.Fatalf("frozen holder's guarded write: %q, want \"guard lost\"", got)
	}
	if got := readLine("raw write"); got != "raw false" {
		t.Fatalf("frozen holder's raw guarded txn: %q, want \"raw false\"", got)
	}
	resp, err := e.newClient(t).Get(ctx, resource)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Kvs[0].Value); got != "parent" {
		t.Fatalf("resource = %q, want the new holder's write", got)
	}
}

// testLogWriter forwards a child's stderr to the test log.
type testLogWriter struct {
	t      *testing.T
	prefix string
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
