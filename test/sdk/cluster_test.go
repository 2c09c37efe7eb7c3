package sdk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/pkg/concurrency"
	"github.com/metastore-io/metastore/pkg/discovery"
	"github.com/metastore-io/metastore/test/framework"
)

// registryChildEnv, when set, makes the test binary run registryChild.
// Its value is "endpoint service addr".
const registryChildEnv = "SDK_REGISTRY_CHILD"

// registryChild registers one instance and prints "registered", then
// keeps it registered until it is killed.
func registryChild(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", registryChildEnv, spec)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f[0]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cli.Close()
	if _, err := discovery.NewRegistry(cli, nil).Register(ctx, f[1], discovery.Endpoint{Addr: f[2]}, shortTTL*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("registered")
	<-ctx.Done()
	return 0
}

// TestThreeMembers runs the coordination primitives on a three-member
// cluster of each target, with clients bound to single members: mutual
// exclusion across members, election failover and Session.Done when the
// leader's session lease expires, ErrSessionExpired for a waiter whose
// lease expired, and a registry entry vanishing when its owner dies.
func TestThreeMembers(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{Size: 3}, func(t *testing.T, e *env) {
		t.Run("MutexExclusion", func(t *testing.T) {
			var clients []*clientv3.Client
			for _, m := range e.cluster.Members() {
				clients = append(clients, m.NewClient(t))
			}
			mutexExclusion(t, clients)
		})
		t.Run("SessionExpiry", func(t *testing.T) { testSessionExpiryOnPausedMember(t, e) })
		t.Run("RegistryOwnerDies", func(t *testing.T) { testRegistryOwnerDies(t, e) })
	})
}

// followers returns the members that are not the leader, per the leader
// every member agrees on.
func followers(ctx context.Context, t *testing.T, e *env) []*framework.Member {
	t.Helper()
	cli := e.newClient(t)
	for {
		var leader uint64
		var ids []uint64
		agreed := true
		for _, m := range e.cluster.Members() {
			callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cli.Status(callCtx, m.Endpoint())
			cancel()
			if err != nil || st.Leader == 0 || (leader != 0 && st.Leader != leader) {
				agreed = false
				break
			}
			leader = st.Leader
			ids = append(ids, st.Header.MemberId)
		}
		if agreed {
			var out []*framework.Member
			for i, m := range e.cluster.Members() {
				if ids[i] != leader {
					out = append(out, m)
				}
			}
			return out
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no agreed leader: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// testSessionExpiryOnPausedMember: sessions whose client talks only to one
// follower lose their lease when that follower is frozen (SIGSTOP) for
// longer than the TTL. The election leader among them is replaced by a
// candidate on another member, their Session.Done closes, and a mutex
// waiter among them gets ErrSessionExpired once the holder lets go.
func testSessionExpiryOnPausedMember(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t)
	fs := followers(ctx, t, e)
	frozen := fs[0]
	var other *framework.Member
	for _, m := range e.cluster.Members() {
		if m != frozen {
			other = m
			break
		}
	}
	cliFrozen, cliOther := frozen.NewClient(t), other.NewClient(t)

	leaderSession := newSession(t, cliFrozen, concurrency.WithTTL(shortTTL))
	if err := concurrency.NewElection(leaderSession, pfx+"/election").Campaign(ctx, "on-frozen"); err != nil {
		t.Fatal(err)
	}
	standby := concurrency.NewElection(newSession(t, cliOther, concurrency.WithTTL(shortTTL)), pfx+"/election")
	elected := make(chan error, 1)
	go func() { elected <- standby.Campaign(ctx, "standby") }()

	holder := concurrency.NewMutex(newSession(t, cliOther), pfx+"/mutex")
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	watchersBefore := watcherCount(ctx, t, frozen)
	waiterSession := newSession(t, cliFrozen, concurrency.WithTTL(shortTTL))
	waited := make(chan error, 1)
	go func() { waited <- concurrency.NewMutex(waiterSession, pfx+"/mutex").Lock(ctx) }()
	for _, q := range []string{pfx + "/election/", pfx + "/mutex/"} {
		if err := waitForKeys(ctx, cliOther, q, 2); err != nil {
			t.Fatal(err)
		}
	}
	// The waiter must be parked in its watch for the holder's key when
	// the member freezes, not in the read before it: a read the frozen
	// member had begun outlives the request timeout while frozen and is
	// answered "request timed out" on resume, which Lock returns (seen
	// in a loaded run). The waiter's watch is the only one on that member.
	for watcherCount(ctx, t, frozen) <= watchersBefore {
		select {
		case <-ctx.Done():
			t.Fatalf("the waiter never watched through %s: %v", frozen.Name(), ctx.Err())
		case <-time.After(50 * time.Millisecond): // the gauge is polled
		}
	}

	if err := frozen.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = frozen.Resume() })
	select {
	case err := <-elected:
		if err != nil {
			t.Fatalf("standby campaign: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the standby never became leader after the leader's lease expired")
	}
	if leader, err := standby.Leader(ctx); err != nil || string(leader.Kvs[0].Value) != "standby" {
		t.Fatalf("leader after failover: %v, %v", leader, err)
	}
	for name, s := range map[string]*concurrency.Session{"leader": leaderSession, "waiter": waiterSession} {
		select {
		case <-s.Done():
		case <-ctx.Done():
			t.Fatalf("the %s's Session.Done never closed after its lease expired", name)
		}
	}
	if err := frozen.Resume(); err != nil {
		t.Fatal(err)
	}
	// The waiter's last reads go to the resumed member: let it serve a
	// linearizable read again first (etcd answered one sent right after
	// SIGCONT with "request timed out" in a CI run).
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cliFrozen.Get(rctx, pfx+"/probe")
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the resumed member never served a read: %v", err)
		case <-time.After(50 * time.Millisecond): // retry pace
		}
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, concurrency.ErrSessionExpired) {
			t.Fatalf("the expired waiter's Lock: %v, want ErrSessionExpired", err)
		}
	case <-ctx.Done():
		t.Fatal("the expired waiter's Lock never returned")
	}
}

// watcherCount is m's etcd_debugging_mvcc_watcher_total gauge: the
// watchers registered on it, from its /metrics page.
func watcherCount(ctx context.Context, t *testing.T, m *framework.Member) float64 {
	t.Helper()
	const gauge = "etcd_debugging_mvcc_watcher_total"
	n, ok := m.MetricSeries(ctx, t, gauge)[gauge]
	if !ok {
		t.Fatalf("metrics of %s: no %s", m.Name(), gauge)
	}
	return n
}

// testRegistryOwnerDies: an instance registered by another process, on
// one member, disappears from a watcher on another member when that
// process is killed.
func testRegistryOwnerDies(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	service := keyPrefix(t)
	members := e.cluster.Members()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	watcher := discovery.NewRegistry(members[1].NewClient(t), nil)
	events, err := watcher.Watch(ctx, service)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), registryChildEnv+"="+strings.Join([]string{members[0].Endpoint(), service, addr}, " "))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "registered\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	for {
		select {
		case ev := <-events:
			if ev.Type != discovery.Added || ev.Endpoint.Addr != addr {
				continue
			}
		case <-ctx.Done():
			t.Fatal("the watcher never saw the instance")
		}
		break
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitRemoved(ctx, t, events, addr)
	if eps, err := watcher.Discover(ctx, service); err != nil || len(eps) != 0 {
		t.Fatalf("after the owner died: %v, %v", eps, err)
	}
}
