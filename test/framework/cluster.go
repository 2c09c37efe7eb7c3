package framework

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// DefaultReadyTimeout bounds cluster start-up and each restart.
	DefaultReadyTimeout = 30 * time.Second
	// startAttempts is how often NewCluster retries when a reserved port was
	// taken before the server could bind it (by a process outside the
	// framework: framework users respect each other's leases).
	startAttempts = 3
	// logTailLines is how much of each member's log a failed test prints.
	logTailLines = 150
	// clusterToken is passed as --initial-cluster-token to every member.
	clusterToken = "metastore-e2e"
)

// ClusterConfig describes the cluster NewCluster starts.
type ClusterConfig struct {
	// Size is the number of members; 0 means 1.
	Size int
	// SnapshotCount is passed as --snapshot-count when non-zero.
	SnapshotCount int
	// ExtraFlags are appended to every member's command line.
	ExtraFlags []string
	// Env are extra environment variables (KEY=value) of every member,
	// for example GOMEMLIMIT.
	Env []string
	// ReadyTimeout bounds start-up; 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Target overrides E2E_TARGET for this cluster: the snapshot interop
	// tests run an etcd and a MetaStore side by side whatever the
	// suite's target. E2E_EXTRA_FLAGS apply only to clusters of the
	// suite's target.
	Target Target
	// Binary, relative to the repository root, replaces the target's
	// binary: bin/ref/etcd-3.5 runs etcd 3.5 as an etcd target.
	Binary string
	// withEnvFlags is set by NewCluster when E2E_EXTRA_FLAGS apply.
	withEnvFlags bool
	// PeerProxies puts a test-owned TCP proxy in front of every member's
	// peer port (Cluster.Network): members listen on a private port and
	// advertise the proxy, so tests can cut a member off and heal it.
	PeerProxies bool
	// TLS starts the members with TLS on the client and/or peer URLs;
	// the framework's clients and etcdctl then use it too. Nil takes
	// E2E_TLS from the environment (TLSEnvVar).
	TLS *TLSConfig
	// PrepareDataDir, when set, is called with each member's name and
	// data directory before the member first starts (for example to
	// mount a small file system there); the directory exists, empty.
	PrepareDataDir func(name, dir string) error
	// MemberEnv, when set, gives each member's extra environment
	// (KEY=value, after Env) from its name and data directory, from its first start
	// (Member.SetEnv changes it later): for example a fault seam's
	// per-member control file.
	MemberEnv func(name, dataDir string) []string
	// DiskFaults points each member's disk-fault seam
	// (METASTORE_DISKFAULT=file=..., internal/faults/diskfault) at a plan file
	// beside its data directory, which Member.SetDiskFault writes. Only
	// a fault build (Binary: bin/metastore-faults) reads it.
	DiskFaults bool
}

// Cluster is a set of members of the target under test, bootstrapped
// together on loopback ports with data in the test's temporary directory.
type Cluster struct {
	target   Target
	repoRoot string
	binary   string
	baseDir  string
	cfg      ClusterConfig
	network  *PeerNetwork // nil without PeerProxies
	// ports holds every member's ports until cleanup, so no concurrently
	// running test binds a killed member's port (see ports.go).
	ports []*PortLease

	// mu guards members against the proxies' reads (memberPIDs); the
	// test's goroutine is the only writer.
	mu      sync.Mutex
	members []*Member
}

// NewCluster starts a cluster for the target named by E2E_TARGET and waits
// until every member is ready. Everything it starts is killed when t ends,
// and a failed test prints the tail of every member's log.
func NewCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	envTarget, err := TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	target := cmp.Or(cfg.Target, envTarget)
	cfg.Target, cfg.withEnvFlags = target, target == envTarget
	repoRoot, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	binary := target.BinaryPath(repoRoot)
	if cfg.Binary != "" {
		binary = filepath.Join(repoRoot, cfg.Binary)
	}
	if err := RequireBinary(binary, target.BuildHint()); err != nil {
		t.Fatal(err)
	}
	if cfg.Size <= 0 {
		cfg.Size = 1
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.TLS == nil {
		cfg.TLS = tlsFromEnv()
	}
	if cfg.TLS != nil {
		cfg.TLS.prepare(t)
	}
	baseDir := t.TempDir()
	c := &Cluster{target: target, repoRoot: repoRoot, binary: binary, baseDir: baseDir, cfg: cfg}
	// Registered after TempDir, so it runs before the directory is removed
	// and the logs can still be read.
	t.Cleanup(func() { c.cleanup(t) })

	for attempt := 1; ; attempt++ {
		err := c.bootstrap(cfg)
		if err == nil {
			return c
		}
		c.killAll(t)
		c.closeProxies()
		lost := c.lostPortRace()
		c.releasePorts()
		if !lost || attempt == startAttempts {
			t.Fatalf("start %d-member %s cluster: %v", cfg.Size, target, err)
		}
		t.Logf("start attempt %d lost a port to another process, retrying on new ports: %v", attempt, err)
		for _, m := range c.members {
			if err := os.RemoveAll(m.dataDir); err != nil {
				t.Fatalf("reset data dir for retry: %v", err)
			}
		}
	}
}

// bootstrap (re)builds the members on freshly reserved ports, starts them
// all, then waits for each to be ready.
func (c *Cluster) bootstrap(cfg ClusterConfig) error {
	c.setMembers(nil)
	peers := make([]string, cfg.Size)
	for i := range cfg.Size {
		m, err := c.newMember("m" + strconv.Itoa(i))
		if err != nil {
			return err
		}
		c.setMembers(append(c.members, m))
		peers[i] = m.name + "=" + m.peerURL
	}
	initialCluster := strings.Join(peers, ",")
	for _, m := range c.members {
		m.setArgs(initialCluster, "new")
	}
	// Members of a multi-member cluster can only elect a leader once a
	// quorum runs, so all are started before any is waited for.
	for _, m := range c.members {
		if err := m.Start(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ReadyTimeout)
	defer cancel()
	return c.WaitReady(ctx)
}

// newMember builds a member on fresh loopback ports (behind a new proxy
// when the cluster uses them), without its --initial-cluster flags.
func (c *Cluster) newMember(name string) (*Member, error) {
	lease, err := reservePorts(4)
	if err != nil {
		return nil, err
	}
	c.ports = append(c.ports, lease)
	ports := lease.Ports()
	m := &Member{
		name:          name,
		binary:        c.binary,
		dataDir:       filepath.Join(c.baseDir, name+".data"),
		clientURL:     fmt.Sprintf("%s://127.0.0.1:%d", c.cfg.TLS.clientScheme(), ports[0]),
		peerURL:       fmt.Sprintf("%s://127.0.0.1:%d", c.cfg.TLS.peerScheme(), ports[1]),
		peerListenURL: fmt.Sprintf("%s://127.0.0.1:%d", c.cfg.TLS.peerScheme(), ports[1]),
		logPath:       filepath.Join(c.baseDir, name+".log"),
		cfg:           c.cfg,
		env:           append([]string(nil), c.cfg.Env...),
	}
	if c.cfg.TLS != nil && c.cfg.TLS.PlainClientURL {
		m.plainClientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[3])
	}
	if c.cfg.MemberEnv != nil {
		m.env = append(m.env, c.cfg.MemberEnv(name, m.dataDir)...)
	}
	if c.cfg.PrepareDataDir != nil {
		if err := os.MkdirAll(m.dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("member %s: create data dir: %w", name, err)
		}
		if err := c.cfg.PrepareDataDir(name, m.dataDir); err != nil {
			return nil, fmt.Errorf("member %s: prepare data dir: %w", name, err)
		}
	}
	if c.cfg.PeerProxies {
		if c.network == nil {
			c.network = newPeerNetwork(c.memberPIDs)
		}
		addr, err := c.network.addProxy(name, fmt.Sprintf("127.0.0.1:%d", ports[2]), fmt.Sprintf("127.0.0.1:%d", ports[1]))
		if err != nil {
			return nil, err
		}
		m.peerURL = c.cfg.TLS.peerScheme() + "://" + addr
	}
	return m, nil
}

// Network is the peer proxies' network (ClusterConfig.PeerProxies), nil
// without them.
func (c *Cluster) Network() *PeerNetwork { return c.network }

// memberPIDs maps the running members' process IDs to their names.
func (c *Cluster) memberPIDs() map[int]string {
	c.mu.Lock()
	members := c.members
	c.mu.Unlock()
	pids := map[int]string{}
	for _, m := range members {
		if m.Running() {
			pids[m.PID()] = m.name
		}
	}
	return pids
}

// NewJoiningMember prepares a member (not started, not yet in the cluster)
// on fresh ports, under the cluster's cleanup. Announce its PeerURL with
// `member add`, then start it with Member.Join and the initial cluster
// etcdctl printed.
func (c *Cluster) NewJoiningMember(name string) (*Member, error) {
	m, err := c.newMember(name)
	if err != nil {
		return nil, err
	}
	c.setMembers(append(c.members, m))
	return m, nil
}

func (c *Cluster) setMembers(ms []*Member) {
	c.mu.Lock()
	c.members = ms
	c.mu.Unlock()
}

// lostPortRace reports whether a member died because its port was taken.
func (c *Cluster) lostPortRace() bool {
	for _, m := range c.members {
		if m.Running() {
			continue
		}
		log, err := os.ReadFile(m.logPath)
		if err == nil && bytes.Contains(log, []byte("address already in use")) {
			return true
		}
	}
	return false
}

// WaitReady waits until every running member is ready.
func (c *Cluster) WaitReady(ctx context.Context) error {
	var errs []error
	for _, m := range c.members {
		if err := m.WaitReady(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Target is the server binary the cluster runs.
func (c *Cluster) Target() Target { return c.target }

// EtcdctlTLSFlags are the --cacert/--cert/--key flags etcdctl needs to
// reach the cluster's client URLs (none without client TLS), for tests
// that run etcdctl themselves.
func (c *Cluster) EtcdctlTLSFlags() []string { return c.cfg.TLS.etcdctlFlags() }

// TLS is the cluster's TLS configuration, nil without TLS.
func (c *Cluster) TLS() *TLSConfig { return c.cfg.TLS }

// RepoRoot is the repository the binaries were found in.
func (c *Cluster) RepoRoot() string { return c.repoRoot }

// Members returns the members in name order (m0, m1, ...).
func (c *Cluster) Members() []*Member { return append([]*Member(nil), c.members...) }

// Member returns member i.
func (c *Cluster) Member(i int) *Member { return c.members[i] }

// ClientURLs lists every member's client URL.
func (c *Cluster) ClientURLs() []string {
	urls := make([]string, len(c.members))
	for i, m := range c.members {
		urls[i] = m.clientURL
	}
	return urls
}

// Endpoints lists every member's host:port.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// NewClient returns a client balanced over all members, closed when t ends.
func (c *Cluster) NewClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := newClient(c.ClientURLs(), c.cfg.TLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Etcdctl returns a runner for the stock etcdctl aimed at every member.
func (c *Cluster) Etcdctl() *Etcdctl {
	return NewEtcdctl(EtcdctlPath(c.repoRoot), c.Endpoints(), c.cfg.TLS.etcdctlFlags()...)
}

// killAll kills every running member.
func (c *Cluster) killAll(t testing.TB) {
	for _, m := range c.members {
		if !m.Running() {
			continue
		}
		if _, err := m.Kill(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// releasePorts frees the members' ports for other tests.
func (c *Cluster) releasePorts() {
	for _, l := range c.ports {
		l.Release()
	}
	c.ports = nil
}

// closeProxies closes the peer proxies, if any.
func (c *Cluster) closeProxies() {
	if c.network != nil {
		c.network.close()
		c.network = nil
	}
}

func (c *Cluster) cleanup(t testing.TB) {
	c.killAll(t)
	c.closeProxies()
	c.releasePorts()
	if !t.Failed() {
		return
	}
	for _, m := range c.members {
		t.Logf("---- last %d lines of %s log (%s) ----\n%s", logTailLines, m.name, m.logPath, tailLines(m.logPath, logTailLines))
	}
}

// tailLines returns the last n lines of the file at path, or a note saying
// why it could not be read.
func tailLines(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}
