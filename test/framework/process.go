package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ExitStatus is how a server process ended: either an exit code or the
// signal that killed it.
type ExitStatus struct {
	// Code is the exit code; -1 when the process was killed by a signal.
	Code int
	// Signal is the terminating signal; 0 when the process exited.
	Signal syscall.Signal
}

// Signaled reports whether a signal ended the process.
func (s ExitStatus) Signaled() bool { return s.Signal != 0 }

func (s ExitStatus) String() string {
	if s.Signaled() {
		return fmt.Sprintf("killed by signal %d (%s)", int(s.Signal), s.Signal)
	}
	return fmt.Sprintf("exit code %d", s.Code)
}

// serverProcess is one run of a server binary. A single goroutine waits for
// it, so any number of callers can observe the exit through exited.
type serverProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
	// status is written by the waiting goroutine before exited is closed
	// and only read after it is closed.
	status ExitStatus
}

// startProcess starts binary with args, appending its stdout and stderr to
// logFile. The child inherits the environment minus ETCD_* and ETCDCTL_*
// variables, which etcd would otherwise read as flags, plus env.
func startProcess(binary string, args, env []string, logFile *os.File) (*serverProcess, error) {
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(ProcessEnv(), env...)
	// If the test binary dies (panic, -timeout) the kernel kills the server
	// too, instead of leaving it bound to its ports.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &serverProcess{cmd: cmd, exited: make(chan struct{})}
	go p.waitForExit()
	return p, nil
}

func (p *serverProcess) waitForExit() {
	err := p.cmd.Wait()
	p.status = exitStatusOf(p.cmd.ProcessState, err)
	close(p.exited)
}

func exitStatusOf(state *os.ProcessState, waitErr error) ExitStatus {
	if state == nil {
		// Wait failed before the process was reaped; report it as an
		// abnormal exit rather than pretending it succeeded.
		return ExitStatus{Code: -1}
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ExitStatus{Code: -1, Signal: ws.Signal()}
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return ExitStatus{Code: -1}
	}
	return ExitStatus{Code: state.ExitCode()}
}

func (p *serverProcess) pid() int { return p.cmd.Process.Pid }

func (p *serverProcess) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal delivers sig; a process that already exited is not an error.
func (p *serverProcess) signal(sig syscall.Signal) error {
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("send %s to pid %d: %w", sig, p.pid(), err)
	}
	return nil
}

// wait blocks until the process exits or timeout passes.
func (p *serverProcess) wait(timeout time.Duration) (ExitStatus, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.status, nil
	case <-timer.C:
		return ExitStatus{}, fmt.Errorf("pid %d still running after %v", p.pid(), timeout)
	}
}

// ProcessEnv is the test's environment without ETCD_* and ETCDCTL_*
// variables, for the servers and etcdctl processes the tests start: both
// read those as flags (ETCDCTL_WATCH_KEY changes what `watch` watches).
// ETCDCTL_API is left out too: etcdctl 3.6 speaks only v3 and warns about
// the variable on stderr.
func ProcessEnv() []string {
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "ETCDCTL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
