package faults

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// straceAttachWait bounds how long strace takes to attach to a server's
// threads.
const straceAttachWait = 20 * time.Second

// fsyncStaller stalls or fails a member's fsyncs: MetaStore's through
// its disk-fault seam (bin/metastore-faults, framework.Member.SetDiskFault);
// etcd's, which has no seam here, by delaying or failing its fdatasync
// and fsync system calls with strace's syscall tampering (-e inject=...:
// delay_enter or error), so that the same test checks etcd's behaviour
// too.
type fsyncStaller struct {
	target framework.Target
}

// newFsyncStaller skips the test where no stall can be made: against
// MetaStore without the fault build (a failure), against etcd without
// strace or the right to trace (ptrace needs root here).
func newFsyncStaller(t *testing.T) fsyncStaller {
	t.Helper()
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if target == framework.TargetMetaStore {
		requireFaultBinary(t)
		return fsyncStaller{target: target}
	}
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skipf("%s has no disk-fault seam, and strace, which would delay its fsyncs, is not installed", target)
	}
	if os.Geteuid() != 0 {
		t.Skipf("%s has no disk-fault seam, and strace may not trace it without root", target)
	}
	return fsyncStaller{target: target}
}

// clusterConfig adapts cfg to the staller: MetaStore's fault build with a
// plan file per member.
func (s fsyncStaller) clusterConfig(cfg framework.ClusterConfig) framework.ClusterConfig {
	if s.target == framework.TargetMetaStore {
		cfg.Binary, cfg.DiskFaults = faultBinary, true
	}
	return cfg
}

// stall makes every fsync of m wait d from now until heal is called.
func (s fsyncStaller) stall(ctx context.Context, t *testing.T, m *framework.Member, d time.Duration) (heal func()) {
	t.Helper()
	if s.target == framework.TargetMetaStore {
		return setDiskFault(ctx, t, m, fmt.Sprintf("fsync-delay=%v", d))
	}
	return straceFsyncs(t, m, "delay_enter="+strconv.FormatInt(d.Microseconds(), 10), fmt.Sprintf("delays them by %v", d))
}

// failFsyncs makes every fsync of m fail with EIO from now until heal is
// called (after m stopped: heal leaves it a healthy disk to restart on).
func (s fsyncStaller) failFsyncs(ctx context.Context, t *testing.T, m *framework.Member) (heal func()) {
	t.Helper()
	if s.target == framework.TargetMetaStore {
		return setDiskFault(ctx, t, m, "fsync-error")
	}
	return straceFsyncs(t, m, "error=EIO", "fails them with EIO")
}

// setDiskFault switches m's disk-fault plan to spec until heal.
func setDiskFault(ctx context.Context, t *testing.T, m *framework.Member, spec string) (heal func()) {
	t.Helper()
	if err := m.SetDiskFault(ctx, spec); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := m.SetDiskFault(ctx, ""); err != nil {
			t.Error(err)
		}
	}
}

// straceFsyncs tampers with every fdatasync and fsync call of m's process
// (strace -e inject=...:tamper) until stop, or until the process exits.
func straceFsyncs(t *testing.T, m *framework.Member, tamper, what string) (stop func()) {
	t.Helper()
	cmd := exec.Command("strace", "-f", "-o", "/dev/null",
		"-e", "trace=fdatasync,fsync", "-e", "inject=fdatasync,fsync:"+tamper,
		"-p", strconv.Itoa(m.PID()))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("strace %s: %v", m.Name(), err)
	}
	exited := make(chan error, 1)
	attached := make(chan struct{})
	var lines []string
	go func() {
		sc := bufio.NewScanner(stderr)
		told := false
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), "attached") && !told {
				close(attached)
				told = true
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case <-attached:
	case err := <-exited:
		t.Fatalf("strace could not attach to %s: %v: %s", m.Name(), err, strings.Join(lines, "; "))
	case <-time.After(straceAttachWait):
		_ = cmd.Process.Kill()
		t.Fatalf("strace did not attach to %s within %v", m.Name(), straceAttachWait)
	}
	t.Logf("strace tampers with %s's fdatasync and fsync calls: %s", m.Name(), what)
	return func() {
		// SIGINT detaches strace from every thread, which runs on.
		_ = cmd.Process.Signal(syscall.SIGINT)
		<-exited
	}
}
