package sdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/concurrency"
	"github.com/metastore-io/metastore/pkg/concurrency/v3electionpb"
	"github.com/metastore-io/metastore/pkg/concurrency/v3lockpb"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
	"github.com/metastore-io/metastore/test/framework"
)

// TestLockElectionServices exercises etcd's v3lock and v3election gRPC
// services twice per target: as the server itself serves them, and as
// MetaStore's implementation (pkg/etcdcompat) serves them when hosted in
// this process on a client of the target. It also drives `etcdctl lock`,
// `etcdctl elect` and the JSON gateway against the server.
func TestLockElectionServices(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{}, func(t *testing.T, e *env) {
		servers := map[string]func(t *testing.T) *grpc.ClientConn{
			"Server": func(t *testing.T) *grpc.ClientConn { return e.newClient(t).ActiveConnection() },
			"Hosted": func(t *testing.T) *grpc.ClientConn { return hostServices(t, e.newClient(t)) },
		}
		for name, dial := range servers {
			t.Run(name+"/Lock", func(t *testing.T) { t.Parallel(); testLockService(t, e, dial(t)) })
			t.Run(name+"/Election", func(t *testing.T) { t.Parallel(); testElectionService(t, e, dial(t)) })
		}
		t.Run("EtcdctlLock", func(t *testing.T) { t.Parallel(); testEtcdctlLock(t, e) })
		t.Run("EtcdctlElect", func(t *testing.T) { t.Parallel(); testEtcdctlElect(t, e) })
		t.Run("Gateway", func(t *testing.T) { t.Parallel(); testGateway(t, e) })
	})
}

// hostServices serves pkg/etcdcompat's Lock and Election services on a
// loopback port, backed by cli, and returns a connection to them.
func hostServices(t *testing.T, cli *clientv3.Client) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	v3lockpb.RegisterLockServer(srv, etcdcompat.NewLockServer(cli))
	v3electionpb.RegisterElectionServer(srv, etcdcompat.NewElectionServer(cli))
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func grant(ctx context.Context, t *testing.T, cli *clientv3.Client, ttl int64) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ID
}

// testLockService: Lock returns a key under the name, a second Lock waits
// until the first is unlocked, and the keys live on the callers' leases.
func testLockService(t *testing.T, e *env, conn *grpc.ClientConn) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	locks := v3lockpb.NewLockClient(conn)
	name := keyPrefix(t) + "/lock"
	leaseA, leaseB := grant(ctx, t, cli, 30), grant(ctx, t, cli, 30)

	first, err := locks.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(name), Lease: int64(leaseA)})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s/%x", name, int64(leaseA)); string(first.Key) != want {
		t.Fatalf("Lock key = %q, want %q", first.Key, want)
	}
	if first.Header == nil || first.Header.Revision == 0 {
		t.Fatalf("Lock header = %v", first.Header)
	}
	second := make(chan *v3lockpb.LockResponse, 1)
	errc := make(chan error, 1)
	go func() {
		resp, err := locks.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(name), Lease: int64(leaseB)})
		errc <- err
		second <- resp
	}()
	if err := waitForKeys(ctx, cli, name+"/", 2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		t.Fatalf("second Lock returned while the first holds (err %v)", err)
	default:
	}
	unlock, err := locks.Unlock(ctx, &v3lockpb.UnlockRequest{Key: first.Key})
	if err != nil || unlock.Header == nil {
		t.Fatalf("Unlock = %v, %v", unlock, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("second Lock after Unlock: %v", err)
	}
	resp := <-second
	ttl, err := cli.TimeToLive(ctx, leaseB, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	if len(ttl.Keys) != 1 || !bytes.Equal(ttl.Keys[0], resp.Key) {
		t.Fatalf("keys on the second caller's lease = %q, want its lock key %q", ttl.Keys, resp.Key)
	}
}

// testElectionService: Campaign, Leader, Proclaim, Observe and Resign,
// including etcd's error texts.
func testElectionService(t *testing.T, e *env, conn *grpc.ClientConn) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	elections := v3electionpb.NewElectionClient(conn)
	name := []byte(keyPrefix(t) + "/election")

	_, err := elections.Leader(ctx, &v3electionpb.LeaderRequest{Name: name})
	if got := status.Convert(err).Message(); got != concurrency.ErrElectionNoLeader.Error() {
		t.Fatalf("Leader of an empty election: %v, want %q", err, concurrency.ErrElectionNoLeader)
	}
	_, err = elections.Proclaim(ctx, &v3electionpb.ProclaimRequest{Value: []byte("x")})
	if got := status.Convert(err).Message(); got != etcdcompat.ErrMissingLeaderKey.Error() {
		t.Fatalf("Proclaim without a leader key: %v, want %q", err, etcdcompat.ErrMissingLeaderKey)
	}

	observeCtx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	observed, err := elections.Observe(observeCtx, &v3electionpb.LeaderRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	expectObserved := func(want string) {
		t.Helper()
		resp, err := observed.Recv()
		if err != nil {
			t.Fatalf("observe, waiting for %q: %v", want, err)
		}
		if string(resp.Kv.Value) != want {
			t.Fatalf("observed %q, want %q", resp.Kv.Value, want)
		}
	}

	lease := grant(ctx, t, cli, 30)
	won, err := elections.Campaign(ctx, &v3electionpb.CampaignRequest{Name: name, Lease: int64(lease), Value: []byte("v1")})
	if err != nil {
		t.Fatal(err)
	}
	leader := won.Leader
	if string(leader.Name) != string(name) || leader.Lease != int64(lease) || leader.Rev == 0 ||
		string(leader.Key) != fmt.Sprintf("%s/%x", name, int64(lease)) {
		t.Fatalf("Campaign leader key = %v", leader)
	}
	expectObserved("v1")
	current, err := elections.Leader(ctx, &v3electionpb.LeaderRequest{Name: name})
	if err != nil || string(current.Kv.Value) != "v1" || current.Kv.CreateRevision != leader.Rev {
		t.Fatalf("Leader = %v, %v", current, err)
	}
	if _, err := elections.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: leader, Value: []byte("v2")}); err != nil {
		t.Fatal(err)
	}
	expectObserved("v2")
	if _, err := elections.Resign(ctx, &v3electionpb.ResignRequest{Leader: leader}); err != nil {
		t.Fatal(err)
	}
	_, err = elections.Proclaim(ctx, &v3electionpb.ProclaimRequest{Leader: leader, Value: []byte("v3")})
	if got := status.Convert(err).Message(); got != concurrency.ErrElectionNotLeader.Error() {
		t.Fatalf("Proclaim after Resign: %v, want %q", err, concurrency.ErrElectionNotLeader)
	}
	next := grant(ctx, t, cli, 30)
	if _, err := elections.Campaign(ctx, &v3electionpb.CampaignRequest{Name: name, Lease: int64(next), Value: []byte("w1")}); err != nil {
		t.Fatal(err)
	}
	expectObserved("w1")
}

// etcdctlLine runs etcdctl with args and returns its stdout lines as they
// come; the process is killed when t ends.
func etcdctlLine(ctx context.Context, t *testing.T, e *env, args ...string) (<-chan string, *exec.Cmd) {
	t.Helper()
	root := e.cluster.RepoRoot()
	cmd := framework.NewEtcdctl(framework.EtcdctlPath(root), []string{e.endpoint()}).Command(ctx, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = &testLogWriter{t: t, prefix: "etcdctl: "}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	return lines, cmd
}

// awaitLine reads lines until one equals want.
func awaitLine(ctx context.Context, t *testing.T, lines <-chan string, want string) {
	t.Helper()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("etcdctl exited before printing %q", want)
			}
			if line == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("etcdctl never printed %q: %v", want, ctx.Err())
		}
	}
}

// testEtcdctlLock: `etcdctl lock` waits for a lock our Mutex holds, then
// runs its command.
func testEtcdctlLock(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	name := keyPrefix(t) + "/lock"
	m := concurrency.NewMutex(newSession(t, cli), name)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lines, cmd := etcdctlLine(ctx, t, e, "lock", name, "echo", "etcdctl-got-it")
	if err := waitForKeys(ctx, cli, name+"/", 2); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-lines:
		t.Fatalf("etcdctl printed %q while our mutex holds the lock", line)
	default:
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	awaitLine(ctx, t, lines, "etcdctl-got-it")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("etcdctl lock: %v", err)
	}
	if keys := keysUnder(ctx, t, cli, name+"/"); len(keys) != 0 {
		t.Fatalf("keys after etcdctl released the lock: %v", keys)
	}
}

// testEtcdctlElect: `etcdctl elect -l` reports our leader and its
// proclamations; `etcdctl elect` campaigns and takes over when ours
// resigns.
func testEtcdctlElect(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	name := keyPrefix(t) + "/election"
	ours := concurrency.NewElection(newSession(t, cli), name)
	if err := ours.Campaign(ctx, "ours-1"); err != nil {
		t.Fatal(err)
	}
	observer, _ := etcdctlLine(ctx, t, e, "elect", "-l", name)
	awaitLine(ctx, t, observer, "ours-1")
	if err := ours.Proclaim(ctx, "ours-2"); err != nil {
		t.Fatal(err)
	}
	awaitLine(ctx, t, observer, "ours-2")

	candidate, _ := etcdctlLine(ctx, t, e, "elect", name, "theirs")
	if err := waitForKeys(ctx, cli, name+"/", 2); err != nil {
		t.Fatal(err)
	}
	if err := ours.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	awaitLine(ctx, t, candidate, "theirs")
	awaitLine(ctx, t, observer, "theirs")
	leader, err := ours.Leader(ctx)
	if err != nil || string(leader.Kvs[0].Value) != "theirs" {
		t.Fatalf("Leader after etcdctl won = %v, %v", leader, err)
	}
}

// testGateway: the JSON gateway routes of the Lock and Election services
// take and return etcd's JSON (base64 bytes, int64 as strings).
func testGateway(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	lease := grant(ctx, t, cli, 30)
	name := keyPrefix(t) + "/gw"
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	post := func(path string, body map[string]any) map[string]any {
		t.Helper()
		payload, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cluster.ClientURLs()[0]+path, bytes.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s: %s", path, resp.Status, raw)
		}
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("POST %s: %v in %s", path, err, raw)
		}
		return out
	}
	leaseStr := strconv.FormatInt(int64(lease), 10)
	locked := post("/v3/lock/lock", map[string]any{"name": b64(name), "lease": leaseStr})
	key, _ := locked["key"].(string)
	if want := b64(fmt.Sprintf("%s/%x", name, int64(lease))); key != want {
		t.Fatalf("gateway Lock key = %v, want %s", locked["key"], want)
	}
	if hdr, _ := locked["header"].(map[string]any); hdr["revision"] == nil {
		t.Fatalf("gateway Lock header = %v", locked["header"])
	}
	post("/v3/lock/unlock", map[string]any{"key": key})

	won := post("/v3/election/campaign", map[string]any{"name": b64(name + "-e"), "lease": leaseStr, "value": b64("gw-leader")})
	leader, _ := won["leader"].(map[string]any)
	if leader["lease"] != leaseStr || leader["name"] != b64(name+"-e") {
		t.Fatalf("gateway Campaign leader = %v", won["leader"])
	}
	current := post("/v3/election/leader", map[string]any{"name": b64(name + "-e")})
	if kv, _ := current["kv"].(map[string]any); kv["value"] != b64("gw-leader") {
		t.Fatalf("gateway Leader = %v", current)
	}
	post("/v3/election/resign", map[string]any{"leader": leader})
	resp, err := cli.Get(ctx, name+"-e/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("keys after gateway Resign: %v, %v", resp, err)
	}
}
