package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// etcdctlTimeouts replace etcdctl's own defaults (--dial-timeout=2s,
// --command-timeout=5s), which a loaded 2-core machine can exceed: the
// first request with --user is an Authenticate whose bcrypt comparison
// alone took over a second in CI. The test's context still bounds every
// run; a test that means to time out passes its own, shorter flags
// (later flags win).
var etcdctlTimeouts = []string{"--dial-timeout=10s", "--command-timeout=30s"}

// etcdctlWaitDelay bounds how long Run waits for etcdctl's output pipes
// after the context kills it.
const etcdctlWaitDelay = 2 * time.Second

// Etcdctl runs the stock etcdctl (API v3) against fixed endpoints.
type Etcdctl struct {
	binary    string
	endpoints []string
	flags     []string // global flags, e.g. --cacert/--cert/--key
}

// CmdResult is what one etcdctl invocation produced.
type CmdResult struct {
	Stdout   string
	Stderr   string
	ExitCode int
}

// NewEtcdctl returns a runner for the etcdctl at binary.
func NewEtcdctl(binary string, endpoints []string, flags ...string) *Etcdctl {
	return &Etcdctl{binary: binary, endpoints: append([]string(nil), endpoints...), flags: flags}
}

// Command is `etcdctl --endpoints=... args...` with the timeouts and
// flags Run uses, not started: for a test that drives a long-lived
// etcdctl itself (a watch, a lock, a mirror) and must not get etcdctl's
// own 2 s dial timeout.
func (e *Etcdctl) Command(ctx context.Context, args ...string) *exec.Cmd {
	full := append([]string{"--endpoints=" + strings.Join(e.endpoints, ",")}, etcdctlTimeouts...)
	full = append(full, e.flags...)
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, e.binary, full...)
	cmd.Env = ProcessEnv()
	return cmd
}

// Run runs `etcdctl --endpoints=... args...` with empty stdin.
func (e *Etcdctl) Run(ctx context.Context, args ...string) (CmdResult, error) {
	return e.RunWithStdin(ctx, "", args...)
}

// RunWithStdin runs etcdctl feeding stdin to it. A non-zero exit code is
// reported in the result, not as an error; the error is for failures to
// run etcdctl at all, including ctx ending first.
func (e *Etcdctl) RunWithStdin(ctx context.Context, stdin string, args ...string) (CmdResult, error) {
	cmd := e.Command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = etcdctlWaitDelay
	err := cmd.Run()
	res := CmdResult{Stdout: stdout.String(), Stderr: stderr.String()}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return res, fmt.Errorf("etcdctl %s: %w (stderr: %s)", strings.Join(args, " "), ctxErr, res.Stderr)
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		return res, nil
	default:
		return res, fmt.Errorf("etcdctl %s: %w", strings.Join(args, " "), err)
	}
}
