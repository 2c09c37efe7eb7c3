package sdk

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/naming/endpoints"
	etcdresolver "go.etcd.io/etcd/client/v3/naming/resolver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/discovery"
	"github.com/metastore-io/metastore/test/framework"
)

// TestDiscovery runs the registry and the gRPC resolver against both
// servers.
func TestDiscovery(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{}, func(t *testing.T, e *env) {
		t.Run("ResolverFollowsInstances", func(t *testing.T) { t.Parallel(); testResolverFollowsInstances(t, e) })
		t.Run("WatchAndDiscover", func(t *testing.T) { t.Parallel(); testWatchAndDiscover(t, e) })
		t.Run("CompatibleWithEtcdNaming", func(t *testing.T) { t.Parallel(); testCompatibleWithEtcdNaming(t, e) })
	})
}

// instance is a gRPC server (the standard health service) registered in
// the registry through a client of its own, so that closing that client is
// a crash: renewals stop, nothing is deregistered.
type instance struct {
	addr   string
	server *grpc.Server
	client *clientv3.Client
	reg    *discovery.Registration
}

func startInstance(ctx context.Context, t *testing.T, e *env, service string) *instance {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	cli := e.newClient(t)
	inst := &instance{addr: l.Addr().String(), server: srv, client: cli}
	inst.reg, err = discovery.NewRegistry(cli, nil).Register(ctx, service, discovery.Endpoint{Addr: inst.addr}, shortTTL*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// crash stops serving and stops renewing without deregistering.
func (i *instance) crash() {
	i.server.Stop()
	i.client.Close()
}

// callUntil calls the health service through conn until every address in
// want has answered and, if avoid is set, at least 10 calls in a row missed
// it. The channel must keep working throughout: every call succeeds, except
// that up to lostInFlight calls may fail with Unavailable, for a call that
// was on its way to an instance as it crashed (no resolver can prevent
// that; the next call goes elsewhere).
func callUntil(ctx context.Context, t *testing.T, conn *grpc.ClientConn, want []string, avoid string, lostInFlight int) {
	t.Helper()
	hc := healthpb.NewHealthClient(conn)
	seen := make(map[string]bool)
	streak := 0
	for calls := 0; ; calls++ {
		var p peer.Peer
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := hc.Check(callCtx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
		cancel()
		if err != nil && status.Code(err) == codes.Unavailable && lostInFlight > 0 {
			lostInFlight--
			t.Logf("call %d failed as an instance crashed: %v", calls, err)
			continue
		}
		if err != nil {
			t.Fatalf("call %d through the resolver failed: %v", calls, err)
		}
		addr := p.Addr.String()
		seen[addr] = true
		if addr == avoid {
			streak = 0
		} else {
			streak++
		}
		done := avoid == "" || streak >= 10
		for _, w := range want {
			done = done && seen[w]
		}
		if done {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("after %d calls saw %v, want all of %v and none of %q", calls, seen, want, avoid)
		}
	}
}

// awaitRemoved waits until the registry reports addr removed from service.
func awaitRemoved(ctx context.Context, t *testing.T, events <-chan discovery.Event, addr string) {
	t.Helper()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("watch closed before %s was removed", addr)
			}
			if ev.Type == discovery.Removed && ev.Endpoint.Addr == addr {
				return
			}
		case <-ctx.Done():
			t.Fatalf("%s never removed from the registry: %v", addr, ctx.Err())
		}
	}
}

// testResolverFollowsInstances: a channel on "metastore:///svc" keeps
// working while instances register, crash (their lease expires) and come
// back, balancing over the live ones.
func testResolverFollowsInstances(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	service := keyPrefix(t) + "/svc"
	reg := discovery.NewRegistry(e.newClient(t), nil)
	events, err := reg.Watch(ctx, service)
	if err != nil {
		t.Fatal(err)
	}
	a := startInstance(ctx, t, e, service)
	b := startInstance(ctx, t, e, service)

	conn, err := grpc.NewClient(discovery.Scheme+":///"+service,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(discovery.NewResolverBuilder(e.newClient(t), nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	callUntil(ctx, t, conn, []string{a.addr, b.addr}, "", 0)

	c := startInstance(ctx, t, e, service)
	callUntil(ctx, t, conn, []string{a.addr, b.addr, c.addr}, "", 0)

	// b crashes: the channel keeps working on a and c, and the registry
	// drops b once its lease expires.
	b.crash()
	callUntil(ctx, t, conn, []string{a.addr, c.addr}, b.addr, 1)
	awaitRemoved(ctx, t, events, b.addr)

	// c keeps serving but its registration lapses (its client is gone):
	// only the resolver can stop calls from reaching it.
	c.client.Close()
	awaitRemoved(ctx, t, events, c.addr)
	callUntil(ctx, t, conn, []string{a.addr}, c.addr, 0)
	eps, err := reg.Discover(ctx, service)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 || eps[0].Addr != a.addr {
		t.Fatalf("Discover = %v, want only %s", eps, a.addr)
	}

	// b comes back on a new address.
	back := startInstance(ctx, t, e, service)
	callUntil(ctx, t, conn, []string{a.addr, back.addr}, "", 0)

	if err := a.reg.Unregister(ctx); err != nil {
		t.Fatal(err)
	}
	callUntil(ctx, t, conn, []string{back.addr}, a.addr, 0)
}

// testWatchAndDiscover: Watch reports the initial instances, then adds and
// removals in order, including a removal by lease expiry.
func testWatchAndDiscover(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	service := keyPrefix(t) + "/svc"
	reg := discovery.NewRegistry(e.newClient(t), nil)
	first, err := reg.Register(ctx, service, discovery.Endpoint{Addr: "10.0.0.1:80", Metadata: map[string]any{"zone": "a"}}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	events, err := reg.Watch(ctx, service)
	if err != nil {
		t.Fatal(err)
	}
	next := func(wantType discovery.EventType, wantAddr string) discovery.Event {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("watch channel closed")
			}
			if ev.Type != wantType || ev.Endpoint.Addr != wantAddr {
				t.Fatalf("event %v %s, want %v %s", ev.Type, ev.Endpoint.Addr, wantType, wantAddr)
			}
			return ev
		case <-ctx.Done():
			t.Fatalf("waiting for %v %s: %v", wantType, wantAddr, ctx.Err())
		}
		panic("unreachable")
	}
	ev := next(discovery.Added, "10.0.0.1:80")
	if md, _ := ev.Endpoint.Metadata.(map[string]any); md["zone"] != "a" {
		t.Fatalf("metadata = %#v, want zone a", ev.Endpoint.Metadata)
	}
	crashing := startInstance(ctx, t, e, service)
	next(discovery.Added, crashing.addr)
	eps, err := reg.Discover(ctx, service)
	if err != nil || len(eps) != 2 {
		t.Fatalf("Discover = %v, %v; want 2 instances", eps, err)
	}
	crashing.crash()
	next(discovery.Removed, crashing.addr)
	if err := first.Unregister(ctx); err != nil {
		t.Fatal(err)
	}
	next(discovery.Removed, "10.0.0.1:80")
	if err := first.Unregister(ctx); err != nil {
		t.Fatalf("second Unregister: %v", err)
	}
	eps, err = reg.Discover(ctx, service)
	if err != nil || len(eps) != 0 {
		t.Fatalf("Discover after everyone left = %v, %v", eps, err)
	}
}

// testCompatibleWithEtcdNaming: instances written by etcd's
// endpoints.Manager are discovered here, ours are listed by it, and etcd's
// own resolver reaches an instance we registered.
func testCompatibleWithEtcdNaming(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	service := keyPrefix(t) + "/svc"
	cli := e.newClient(t)
	manager, err := endpoints.NewManager(cli, service)
	if err != nil {
		t.Fatal(err)
	}
	if err := manager.AddEndpoint(ctx, service+"/by-etcd", endpoints.Endpoint{Addr: "10.1.1.1:1", Metadata: "m"}); err != nil {
		t.Fatal(err)
	}
	inst := startInstance(ctx, t, e, service)

	ours, err := discovery.NewRegistry(cli, nil).Discover(ctx, service)
	if err != nil {
		t.Fatal(err)
	}
	// Ordered by key: service+"/127.0.0.1:..." before service+"/by-etcd".
	if got, want := fmt.Sprint(ours), fmt.Sprintf("[{%s <nil>} {10.1.1.1:1 m}]", inst.addr); got != want {
		t.Fatalf("our Discover of mixed registrations = %s, want %s", got, want)
	}
	theirs, err := manager.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ep, ok := theirs[inst.reg.Key()]; !ok || ep.Addr != inst.addr {
		t.Fatalf("etcd's List = %v, missing our instance %s", theirs, inst.addr)
	}
	if err := manager.DeleteEndpoint(ctx, service+"/by-etcd"); err != nil {
		t.Fatal(err)
	}

	builder, err := etcdresolver.NewBuilder(cli)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("etcd:///"+service,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(builder))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	callUntil(ctx, t, conn, []string{inst.addr}, "", 0)
}
