package framework

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const (
	// DefaultDialTimeout bounds how long a client waits for a connection.
	DefaultDialTimeout = 5 * time.Second
	// killTimeout bounds the wait for a SIGKILLed process to be reaped.
	killTimeout = 10 * time.Second
	// readyProbeTimeout bounds one readiness probe, so that a probe stuck
	// on an unresponsive server cannot use up the whole readiness deadline.
	readyProbeTimeout = 2 * time.Second
	// readyPollInterval spaces readiness probes.
	readyPollInterval = 50 * time.Millisecond
)

// readyProbeKey is what WaitReady reads; its value is irrelevant, only the
// success of a linearizable read is.
const readyProbeKey = "/e2e/ready-probe"

// Member is one server of a cluster. Its name, data directory, URLs and
// flags stay fixed for its lifetime, so Restart brings back the same member
// on the same data. At most one process runs for a member at a time.
type Member struct {
	name      string
	binary    string
	args      []string
	dataDir   string
	clientURL string
	// peerURL is the advertised peer URL; peerListenURL the one the
	// member listens on. They differ when a proxy sits in front.
	peerURL       string
	peerListenURL string
	logPath       string
	cfg           ClusterConfig
	peerCert      *CertPair // overrides the PKI's member certificate (UsePeerCert)
	// plainClientURL is a second, plaintext client URL served beside the
	// TLS one (TLSConfig.PlainClientURL); not advertised.
	plainClientURL string
	creds          login // login.go

	mu     sync.Mutex
	env    []string       // extra environment of the next runs (SetEnv)
	proc   *serverProcess // nil before the first Start; the last run after exit
	starts int
}

// PlainClientURL is the plaintext client URL the member also listens on
// with TLSConfig.PlainClientURL, "" otherwise.
func (m *Member) PlainClientURL() string { return m.plainClientURL }

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// UsePeerCert makes the member present pair on its peer URLs (as server
// and as client) from its next Start or Join on, in place of the PKI's
// member certificate.
func (m *Member) UsePeerCert(pair *CertPair) {
	m.mu.Lock()
	m.peerCert = pair
	m.mu.Unlock()
}

// Name is the member's --name.
func (m *Member) Name() string { return m.name }

// ClientURL is the member's advertised client URL, e.g. http://127.0.0.1:40001.
func (m *Member) ClientURL() string { return m.clientURL }

// PeerURL is the member's advertised peer URL (its proxy's, if any).
func (m *Member) PeerURL() string { return m.peerURL }

// setArgs builds the command line for joining initialCluster in state
// "new" or "existing".
func (m *Member) setArgs(initialCluster, state string) {
	m.args = []string{
		"--name=" + m.name,
		"--data-dir=" + m.dataDir,
		"--listen-client-urls=" + strings.Join(append([]string{m.clientURL}, nonEmpty(m.plainClientURL)...), ","),
		"--advertise-client-urls=" + m.clientURL,
		"--listen-peer-urls=" + m.peerListenURL,
		"--initial-advertise-peer-urls=" + m.peerURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=" + clusterToken,
	}
	if m.cfg.SnapshotCount > 0 {
		m.args = append(m.args, "--snapshot-count="+strconv.Itoa(m.cfg.SnapshotCount))
	}
	m.args = append(m.args, m.cfg.TLS.serverFlags()...)
	if m.peerCert != nil {
		// Later flags win: this member presents its own peer certificate.
		m.args = append(m.args, "--peer-cert-file="+m.peerCert.CertFile, "--peer-key-file="+m.peerCert.KeyFile)
	}
	m.args = append(m.args, m.cfg.ExtraFlags...)
	if m.cfg.withEnvFlags {
		m.args = append(m.args, strings.Fields(os.Getenv(ExtraFlagsEnvVar))...)
	}
}

// Join starts a member made by Cluster.NewJoiningMember with
// --initial-cluster-state=existing, without waiting for it to be ready (a
// learner never passes WaitReady's linearizable read).
func (m *Member) Join(initialCluster string) error {
	m.mu.Lock()
	m.setArgs(initialCluster, "existing")
	m.mu.Unlock()
	return m.Start()
}

// Endpoint is the client URL's host:port, the form etcdctl and the
// benchmark tool take.
func (m *Member) Endpoint() string {
	u, err := url.Parse(m.clientURL)
	if err != nil {
		// clientURL is built by this package from a literal host and a
		// port number; it always parses.
		panic(fmt.Sprintf("member %s: malformed client URL %q: %v", m.name, m.clientURL, err))
	}
	return u.Host
}

// DataDir is the member's --data-dir.
func (m *Member) DataDir() string { return m.dataDir }

// LogPath is the file that collects the stdout and stderr of every run.
func (m *Member) LogPath() string { return m.logPath }

// Args is the command line the member is started with (without the binary).
func (m *Member) Args() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.args...)
}

// SetArgs replaces the command line of the member's next Start, for tests
// that restart a member with changed flags (its data dir stays).
func (m *Member) SetArgs(args []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.args = append([]string(nil), args...)
}

// SetBinary replaces the server binary (a path) of the member's next
// Start, for tests that start another server on the data dir one left:
// MetaStore on an etcd member's.
func (m *Member) SetBinary(path string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.binary = path
}

// WithoutEnvFlags leaves E2E_EXTRA_FLAGS out of the member's next runs:
// they are flags of the suite's target, and a member that runs another
// server (SetBinary) would refuse them.
func (m *Member) WithoutEnvFlags() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg.withEnvFlags = false
}

// SetEnv sets extra environment variables (KEY=value) for the member's
// next runs; nil clears them.
func (m *Member) SetEnv(env []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.env = append([]string(nil), env...)
}

// Start launches the server process without waiting for it to be ready.
func (m *Member) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && m.proc.running() {
		return fmt.Errorf("start member %s: already running as pid %d", m.name, m.proc.pid())
	}
	logFile, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start member %s: open log: %w", m.name, err)
	}
	// The child holds its own descriptor for the log; ours is only needed
	// until the fork.
	defer logFile.Close()
	m.starts++
	fmt.Fprintf(logFile, "=== e2e: run #%d of member %s at %s: %s %s\n",
		m.starts, m.name, time.Now().Format(time.RFC3339Nano), m.binary, strings.Join(m.args, " "))
	env := m.env
	if f := m.diskFaultFile(); f != "" {
		// Beside SetEnv's variables, which replace m.env whole.
		env = append(slices.Clip(env), "METASTORE_DISKFAULT=file="+f)
	}
	proc, err := startProcess(m.binary, m.args, env, logFile)
	if err != nil {
		return fmt.Errorf("start member %s: %w", m.name, err)
	}
	m.proc = proc
	return nil
}

// current returns the last started process, or an error when the member
// was never started.
func (m *Member) current() (*serverProcess, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return nil, fmt.Errorf("member %s was never started", m.name)
	}
	return m.proc, nil
}

// Running reports whether the member's process is alive.
func (m *Member) Running() bool {
	proc, err := m.current()
	return err == nil && proc.running()
}

// PID is the process id of the last run, or 0 if never started.
func (m *Member) PID() int {
	proc, err := m.current()
	if err != nil {
		return 0
	}
	return proc.pid()
}

// Exited is closed when the current run ends. It is nil when the member was
// never started.
func (m *Member) Exited() <-chan struct{} {
	proc, err := m.current()
	if err != nil {
		return nil
	}
	return proc.exited
}

// LastExit is how the current run ended; false while it runs or when the
// member was never started.
func (m *Member) LastExit() (ExitStatus, bool) {
	proc, err := m.current()
	if err != nil || proc.running() {
		return ExitStatus{}, false
	}
	return proc.status, true
}

// WaitReady polls the member until a Status RPC reports a leader and a
// linearizable Get succeeds. It fails as soon as the process exits or ctx
// ends.
func (m *Member) WaitReady(ctx context.Context) error {
	proc, err := m.current()
	if err != nil {
		return fmt.Errorf("wait for member %s: %w", m.name, err)
	}
	// With credentials the client authenticates when it is created,
	// which fails while the member is down: probe with a fresh client.
	var cli *clientv3.Client
	if user, _ := m.creds.get(); user == "" {
		if cli, err = m.dial(); err != nil {
			return fmt.Errorf("wait for member %s: %w", m.name, err)
		}
		defer cli.Close()
	}

	poll := time.NewTicker(readyPollInterval)
	defer poll.Stop()
	for {
		probeErr := m.probe(ctx, cli)
		if probeErr == nil {
			return nil
		}
		select {
		case <-proc.exited:
			return fmt.Errorf("member %s exited (%s) before becoming ready; last probe: %w", m.name, proc.status, probeErr)
		case <-ctx.Done():
			return fmt.Errorf("member %s not ready: %w; last probe: %w", m.name, ctx.Err(), probeErr)
		case <-poll.C:
		}
	}
}

// WaitNoLeader waits until m, asked through cli, reports in its
// Maintenance status that it knows no leader: a member left without
// quorum, once its election timeout has passed.
func (m *Member) WaitNoLeader(ctx context.Context, cli *clientv3.Client) error {
	poll := time.NewTicker(readyPollInterval)
	defer poll.Stop()
	for {
		probeCtx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
		st, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Status(probeCtx, &pb.StatusRequest{})
		cancel()
		switch {
		case err != nil:
			return fmt.Errorf("status of member %s: %w", m.name, err)
		case st.Leader == 0:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member %s still follows %x: %w", m.name, st.Leader, ctx.Err())
		case <-poll.C:
		}
	}
}

// probe runs probeReady with cli, or with a client of its own when cli is
// nil.
func (m *Member) probe(ctx context.Context, cli *clientv3.Client) error {
	if cli != nil {
		return probeReady(ctx, cli)
	}
	cli, err := m.dial()
	if err != nil {
		return err
	}
	defer cli.Close()
	return probeReady(ctx, cli)
}

func probeReady(ctx context.Context, cli *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
	defer cancel()
	status, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if status.Leader == 0 {
		return errors.New("status: no leader yet")
	}
	if _, err := cli.Get(ctx, readyProbeKey); err != nil {
		return fmt.Errorf("linearizable get: %w", err)
	}
	return nil
}

// Stop sends SIGTERM and waits up to timeout for the process to exit. On
// timeout the process is killed and an error is returned alongside the
// status of the killed process.
func (m *Member) Stop(timeout time.Duration) (ExitStatus, error) {
	proc, err := m.current()
	if err != nil {
		return ExitStatus{}, fmt.Errorf("stop member %s: %w", m.name, err)
	}
	if !proc.running() {
		return ExitStatus{}, fmt.Errorf("stop member %s: not running (last run ended with %s)", m.name, proc.status)
	}
	if err := proc.signal(syscall.SIGTERM); err != nil {
		return ExitStatus{}, fmt.Errorf("stop member %s: %w", m.name, err)
	}
	status, waitErr := proc.wait(timeout)
	if waitErr == nil {
		return status, nil
	}
	status, killErr := m.kill(proc)
	return status, errors.Join(fmt.Errorf("stop member %s: no exit after SIGTERM: %w", m.name, waitErr), killErr)
}

// Pause freezes the member's process with SIGSTOP: it holds its
// connections but answers nothing, like a machine stalled by the kernel.
func (m *Member) Pause() error { return m.sendSignal(syscall.SIGSTOP) }

// Resume lets a paused member run again (SIGCONT).
func (m *Member) Resume() error { return m.sendSignal(syscall.SIGCONT) }

func (m *Member) sendSignal(sig syscall.Signal) error {
	proc, err := m.current()
	if err != nil {
		return fmt.Errorf("signal member %s: %w", m.name, err)
	}
	if err := proc.signal(sig); err != nil {
		return fmt.Errorf("signal member %s: %w", m.name, err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to be reaped: the crash
// that durability tests inflict.
func (m *Member) Kill() (ExitStatus, error) {
	proc, err := m.current()
	if err != nil {
		return ExitStatus{}, fmt.Errorf("kill member %s: %w", m.name, err)
	}
	return m.kill(proc)
}

func (m *Member) kill(proc *serverProcess) (ExitStatus, error) {
	if err := proc.signal(syscall.SIGKILL); err != nil {
		return ExitStatus{}, fmt.Errorf("kill member %s: %w", m.name, err)
	}
	status, err := proc.wait(killTimeout)
	if err != nil {
		return ExitStatus{}, fmt.Errorf("kill member %s: %w", m.name, err)
	}
	return status, nil
}

// Restart starts a stopped member on its existing data directory and waits
// until it is ready.
func (m *Member) Restart(ctx context.Context) error {
	if err := m.Start(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if err := m.WaitReady(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// dial returns a client bound to this member only.
func (m *Member) dial() (*clientv3.Client, error) {
	user, password := m.creds.get()
	return newClientAs([]string{m.clientURL}, m.cfg.TLS, user, password)
}

// NewClient returns a client bound to this member only, closed when t ends.
func (m *Member) NewClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := m.dial()
	if err != nil {
		t.Fatalf("client for member %s: %v", m.name, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newClient builds a clientv3 client. It does not block on the connection:
// the first RPC does, within its own context.
func newClient(endpoints []string, tc *TLSConfig) (*clientv3.Client, error) {
	return newClientAs(endpoints, tc, "", "")
}

// newClientAs is newClient authenticating as user (none when empty).
func newClientAs(endpoints []string, tc *TLSConfig, user, password string) (*clientv3.Client, error) {
	tlsCfg, err := tc.ClientTLS()
	if err != nil {
		return nil, fmt.Errorf("new client for %v: %w", endpoints, err)
	}
	cli, err := clientv3.New(clientv3.Config{
		TLS:         tlsCfg,
		Endpoints:   endpoints,
		DialTimeout: DefaultDialTimeout,
		Username:    user,
		Password:    password,
		// The client's own retry warnings would drown the server logs that
		// matter when a test fails.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("new client for %v: %w", endpoints, err)
	}
	return cli, nil
}
