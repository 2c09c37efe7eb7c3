package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/test/framework"
)

// The command-line tests start the target binary themselves, with exactly
// the command line under test (the framework adds its own flags).

// targetBinary is the server binary E2E_TARGET names.
func targetBinary(t *testing.T) (framework.Target, string) {
	t.Helper()
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return target, target.BinaryPath(root)
}

// freePorts returns n distinct free loopback ports, held against every
// other framework user until t ends (framework.ReservePorts).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	return framework.ReservePorts(t, n)
}

// rawMember is one server process started with a given command line.
type rawMember struct {
	t       *testing.T
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error // the process's end, once exited is closed
}

// startRaw starts the target binary with args (and extra environment) in
// dir, its output in a log file printed if the test fails.
func startRaw(t *testing.T, dir string, args []string, env ...string) *rawMember {
	t.Helper()
	_, bin := targetBinary(t)
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(framework.ProcessEnv(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &rawMember{t: t, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() { m.err = cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-m.exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s %s\n--- log ---\n%s", bin, strings.Join(args, " "), tail(string(b), 60))
		}
	})
	return m
}

func tail(s string, lines int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// waitExit waits for the process to end by itself and returns its output.
func (m *rawMember) waitExit(ctx context.Context) (exitCode int, output string) {
	m.t.Helper()
	select {
	case <-m.exited:
	case <-ctx.Done():
		m.t.Fatalf("process did not exit: %v", ctx.Err())
	}
	b, _ := os.ReadFile(m.logPath)
	var ee *exec.ExitError
	if errors.As(m.err, &ee) {
		return ee.ExitCode(), string(b)
	}
	return 0, string(b)
}

// waitReady polls a linearizable Get on endpoint until it succeeds, failing
// at once if the process exits.
func (m *rawMember) waitReady(ctx context.Context, endpoint string) {
	m.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		m.t.Fatal(err)
	}
	defer cli.Close()
	m.pollUntil(ctx, func(ctx context.Context) error {
		_, err := cli.Get(ctx, "ready-probe")
		return err
	})
}

// waitHTTP polls url until it answers 200.
func (m *rawMember) waitHTTP(ctx context.Context, url string) {
	m.t.Helper()
	m.pollUntil(ctx, func(ctx context.Context) error {
		code, body, err := httpGet(ctx, url)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("%s: %d %s", url, code, body)
		}
		return err
	})
}

func (m *rawMember) pollUntil(ctx context.Context, probe func(context.Context) error) {
	m.t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := probe(pctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-m.exited:
			b, _ := os.ReadFile(m.logPath)
			m.t.Fatalf("server exited (%v) before it was ready: last probe: %v\n%s", m.err, err, tail(string(b), 30))
		case <-ctx.Done():
			m.t.Fatalf("server not ready: %v; last probe: %v", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// logLines are the server's output lines so far.
func (m *rawMember) logLines() []string {
	f, err := os.Open(m.logPath)
	if err != nil {
		m.t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	return doHTTP(req)
}

func doHTTP(req *http.Request) (int, string, error) {
	return doHTTPOn(http.DefaultClient, req)
}

// doHTTPOn sends req with client and returns the status code and body.
func doHTTPOn(client *http.Client, req *http.Request) (int, string, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String(), err
}

// memberFlags is a one-member cluster's command line on the given client
// and peer ports.
func memberFlags(dir string, name string, clientPort, peerPort int) []string {
	c := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	p := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	return []string{
		"--name=" + name,
		"--data-dir=" + filepath.Join(dir, name+".data"),
		"--listen-client-urls=" + c, "--advertise-client-urls=" + c,
		"--listen-peer-urls=" + p, "--initial-advertise-peer-urls=" + p,
		"--initial-cluster=" + name + "=" + p,
	}
}
