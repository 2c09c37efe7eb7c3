package etcddiff

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
	"github.com/metastore-io/metastore/test/framework"
)

// EnvEtcdBinary names the environment variable that overrides where the
// reference etcd binary is looked for.
const EnvEtcdBinary = "METASTORE_REF_ETCD"

// startTimeout bounds how long a reference etcd may take to serve.
const startTimeout = 30 * time.Second

// EtcdBinary returns the reference etcd binary: $METASTORE_REF_ETCD if
// set, else bin/ref/etcd at the root of the module containing the
// working directory. ok is false if there is no such file.
func EtcdBinary() (path string, ok bool) {
	if p := os.Getenv(EnvEtcdBinary); p != "" {
		_, err := os.Stat(p)
		return p, err == nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", "ref", "etcd")
			_, err := os.Stat(p)
			return p, err == nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// etcd is one reference etcd member run for a test.
type etcd struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
	conn   *grpc.ClientConn
	kv     pb.KVClient
	lease  pb.LeaseClient
	maint  pb.MaintenanceClient
	watch  pb.WatchClient
}

// startEtcd starts a single-member etcd with a fresh data directory and
// connects to it; t's cleanup stops it. Its ports are reserved through
// the e2e framework (outside the kernel's ephemeral range, locked against
// every other test process until t ends): a port taken from 127.0.0.1:0
// and closed could be bound meanwhile by another package's server, which
// waitReady would then take for etcd. It retries a few times, since a
// process outside the framework may still bind a reserved port.
func startEtcd(t *testing.T, binary string) *etcd {
	t.Helper()
	var err error
	for attempt := range 3 {
		var e *etcd
		if e, err = tryStartEtcd(t, binary, attempt); err == nil {
			return e
		}
		t.Logf("starting etcd (attempt %d): %v", attempt+1, err)
	}
	t.Fatalf("cannot start the reference etcd %s: %v", binary, err)
	return nil
}

func tryStartEtcd(t *testing.T, binary string, attempt int) (*etcd, error) {
	ports := framework.ReservePorts(t, 2)
	clientPort, peerPort := ports[0], ports[1]
	dir := t.TempDir()
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	logPath := filepath.Join(dir, fmt.Sprintf("etcd-%d.log", attempt))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(binary,
		"--name", "diff",
		"--data-dir", filepath.Join(dir, fmt.Sprintf("data-%d", attempt)),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "diff="+peerURL,
		"--max-txn-ops", strconv.Itoa(kvstoretest.MaxTxnOps),
		"--unsafe-no-fsync", "--heartbeat-interval", "10", "--election-timeout", "100",
		"--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	e := &etcd{cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		close(e.exited)
	}()
	stop := func() {
		if e.conn != nil {
			e.conn.Close()
		}
		cmd.Process.Kill()
		<-e.exited
	}
	// etcd is not listening yet: retry connecting quickly rather than
	// with gRPC's default backoff of a second and more.
	fastRetry := grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.5, MaxDelay: 200 * time.Millisecond},
		MinConnectTimeout: time.Second,
	})
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(clientPort), grpc.WithTransportCredentials(insecure.NewCredentials()), fastRetry)
	if err != nil {
		stop()
		return nil, err
	}
	e.conn = conn
	e.kv, e.lease = pb.NewKVClient(conn), pb.NewLeaseClient(conn)
	e.maint, e.watch = pb.NewMaintenanceClient(conn), pb.NewWatchClient(conn)
	if err := e.waitReady(); err != nil {
		stop()
		return nil, fmt.Errorf("%w\n%s", err, e.logTail())
	}
	t.Cleanup(stop)
	return e, nil
}

// waitReady polls etcd until it answers a read, it exits or startTimeout
// passes.
func (e *etcd) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := e.kv.Range(ctx, &pb.RangeRequest{Key: []byte("ready")})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-e.exited:
			return errors.New("etcd exited during startup")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not ready after %v: %w", startTimeout, err)
		}
	}
}

func (e *etcd) logTail() string {
	data, err := os.ReadFile(e.log)
	if err != nil {
		return "(no etcd log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return "etcd log tail:\n" + strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// grantLeases grants ids with a TTL far beyond any test.
func (e *etcd) grantLeases(ids []int64) error {
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := e.lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: 3600})
		cancel()
		if err != nil {
			return fmt.Errorf("grant lease %d: %w", id, err)
		}
	}
	return nil
}
