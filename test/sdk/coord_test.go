package sdk

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/metastore-io/metastore/pkg/coord"
	"github.com/metastore-io/metastore/pkg/coord/config"
	"github.com/metastore-io/metastore/pkg/coord/lock"
	"github.com/metastore-io/metastore/pkg/coord/registry"
	"github.com/metastore-io/metastore/test/framework"
)

// TestCoord runs the coord module (pkg/coord) against both servers: every
// method and error of its design.
func TestCoord(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{}, func(t *testing.T, e *env) {
		t.Run("LockMethods", func(t *testing.T) { t.Parallel(); testCoordLockMethods(t, e) })
		t.Run("LockExpired", func(t *testing.T) { t.Parallel(); testCoordLockExpired(t, e) })
		t.Run("Registry", func(t *testing.T) { t.Parallel(); testCoordRegistry(t, e) })
		t.Run("Config", func(t *testing.T) { t.Parallel(); testCoordConfig(t, e) })
		t.Run("NewRetriesThenFails", func(t *testing.T) { t.Parallel(); testCoordUnreachable(t) })
	})
}

// newProvider returns a Provider in a namespace of the test's own.
func newProvider(t *testing.T, e *env, opts ...coord.Option) coord.Provider {
	t.Helper()
	ns := strings.TrimPrefix(keyPrefix(t), "/") + "/"
	p, err := coord.New(testContext(t, scenarioTimeout), coord.CoordinatorConfig{
		Endpoints: e.cluster.Endpoints(), Timeout: 5 * time.Second, Namespace: ns}, opts...)
	if err != nil {
		t.Fatalf("coord.New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// testCoordLockMethods: Acquire, TryAcquire (ErrLockConflict), Key, TTL,
// Renew, IsExpired, Unlock (ErrLockNotHeld the second time), a blocked
// Acquire that gets the lock on Unlock, ValidationError, and the metrics.
func testCoordLockMethods(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	reg := prometheus.NewRegistry()
	p := newProvider(t, e, coord.WithRegisterer(reg))
	held, err := p.Lock().Acquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(held.Key(), "locks/job/") {
		t.Fatalf("Key %q is not under the namespace's locks/job/", held.Key())
	}
	if ttl, err := held.TTL(ctx); err != nil || ttl <= 0 || ttl > 10*time.Second {
		t.Fatalf("TTL: %v, %v", ttl, err)
	}
	if ok, err := held.Renew(ctx); !ok || err != nil {
		t.Fatalf("Renew: %v, %v", ok, err)
	}
	if expired, err := held.IsExpired(ctx); expired || err != nil {
		t.Fatalf("IsExpired while held: %v, %v", expired, err)
	}
	if _, err := p.Lock().TryAcquire(ctx, "job", 10*time.Second); !errors.Is(err, coord.ErrLockConflict) {
		t.Fatalf("TryAcquire of a held lock: %v, want ErrLockConflict", err)
	}
	var ve *coord.ValidationError
	if _, err := p.Lock().Acquire(ctx, "", time.Second); !errors.As(err, &ve) {
		t.Fatalf("Acquire with no key: %v, want a ValidationError", err)
	}
	next := make(chan lock.Lock, 1)
	go func() {
		l, err := p.Lock().Acquire(ctx, "job", 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		next <- l
	}()
	if err := waitForKeys(ctx, e.newClient(t), strings.TrimSuffix(held.Key(), held.Key()[strings.LastIndex(held.Key(), "/")+1:]), 2); err != nil {
		t.Fatal(err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := held.Unlock(ctx); !errors.Is(err, coord.ErrLockNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrLockNotHeld", err)
	}
	if _, err := held.TTL(ctx); !errors.Is(err, coord.ErrLockNotHeld) {
		t.Fatalf("TTL after Unlock: %v, want ErrLockNotHeld", err)
	}
	if expired, err := held.IsExpired(ctx); !expired || err != nil {
		t.Fatalf("IsExpired after Unlock: %v, %v", expired, err)
	}
	var second lock.Lock
	select {
	case second = <-next:
	case <-ctx.Done():
		t.Fatal("the waiting Acquire never got the lock")
	}
	if second == nil {
		t.FailNow()
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, result string
		want         float64
	}{
		{"coord_lock_acquires_total", "success", 2},
		{"coord_lock_acquires_total", "conflict", 1},
		{"coord_lock_renews_total", "success", 1},
	} {
		if got := counterValue(t, reg, c.name, c.result); got != c.want {
			t.Errorf("%s{result=%q} = %v, want %v", c.name, c.result, got, c.want)
		}
	}
	if n := histogramCount(t, reg, "coord_lock_hold_seconds"); n != 2 {
		t.Errorf("hold times observed %d, want 2", n)
	}
}

// counterValue is the value of name{result=result} in reg (0 if absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if f.GetName() == name && l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// histogramCount is the number of observations of histogram name in reg.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// leaseOfKey is the lease a lock key is attached to.
func leaseOfKey(ctx context.Context, t *testing.T, cli *clientv3.Client, key string) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("get %s: %v (%d keys)", key, err, len(resp.Kvs))
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// testCoordLockExpired: a lock whose lease is revoked behind its back is
// expired: IsExpired says so, and TTL, Renew and Unlock fail with
// ErrLockExpired.
func testCoordLockExpired(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	p := newProvider(t, e)
	held, err := p.Lock().Acquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cli := e.newClient(t)
	if _, err := cli.Revoke(ctx, leaseOfKey(ctx, t, cli, held.Key())); err != nil {
		t.Fatal(err)
	}
	if expired, err := held.IsExpired(ctx); !expired || err != nil {
		t.Fatalf("IsExpired after the lease was revoked: %v, %v", expired, err)
	}
	if _, err := held.TTL(ctx); !errors.Is(err, coord.ErrLockExpired) {
		t.Fatalf("TTL: %v, want ErrLockExpired", err)
	}
	if ok, err := held.Renew(ctx); ok || !errors.Is(err, coord.ErrLockExpired) {
		t.Fatalf("Renew: %v, %v, want false, ErrLockExpired", ok, err)
	}
	if err := held.Unlock(ctx); !errors.Is(err, coord.ErrLockExpired) {
		t.Fatalf("Unlock: %v, want ErrLockExpired", err)
	}
}

// testCoordRegistry: Register, Discover, Watch, GetConnection (a real gRPC
// call through the resolver), Unregister, and the errors.
func testCoordRegistry(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	p := newProvider(t, e)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	host, portStr, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(portStr)
	info := registry.ServiceInfo{ID: "user-1", Name: "user", Address: host, Port: port, Metadata: map[string]string{"zone": "b"}}

	events, err := p.Registry().Watch(ctx, "user")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Registry().Register(ctx, info, shortTTL*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev := nextServiceEvent(ctx, t, events); ev.Type != registry.EventTypePut || ev.Service.ID != "user-1" || ev.Service.Metadata["zone"] != "b" {
		t.Fatalf("first event %+v, want PUT of user-1 with its metadata", ev)
	}
	found, err := p.Registry().Discover(ctx, "user")
	if err != nil || len(found) != 1 || found[0].ID != "user-1" || found[0].Port != port || found[0].TTL != shortTTL*time.Second {
		t.Fatalf("Discover: %+v, %v", found, err)
	}
	conn, err := p.Registry().GetConnection(ctx, "user")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("call through GetConnection: %v", err)
	}
	if err := p.Registry().Unregister(ctx, "user-1"); err != nil {
		t.Fatal(err)
	}
	if ev := nextServiceEvent(ctx, t, events); ev.Type != registry.EventTypeDelete || ev.Service.ID != "user-1" {
		t.Fatalf("event after Unregister %+v, want DELETE of user-1", ev)
	}
	if err := p.Registry().Unregister(ctx, "user-1"); !errors.Is(err, registry.ErrNotRegistered) {
		t.Fatalf("second Unregister: %v, want ErrNotRegistered", err)
	}
	var ve *coord.ValidationError
	if err := p.Registry().Register(ctx, registry.ServiceInfo{Name: "user", Address: host}, time.Second); !errors.As(err, &ve) {
		t.Fatalf("Register without an ID: %v, want a ValidationError", err)
	}
}

func nextServiceEvent(ctx context.Context, t *testing.T, events <-chan registry.ServiceEvent) registry.ServiceEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("registry watch closed")
		}
		return ev
	case <-ctx.Done():
		t.Fatal("no registry event")
	}
	return registry.ServiceEvent{}
}

type apiLimits struct {
	QPS   int    `json:"qps"`
	Owner string `json:"owner"`
}

// testCoordConfig: Get/Set, CompareAndSet on versions, Watch with typed
// events and Close, and the prefix batch operations.
func testCoordConfig(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	c := newProvider(t, e).Config()
	var got apiLimits
	if err := c.Get(ctx, "api", &got); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if err := c.CompareAndSet(ctx, "api", apiLimits{QPS: 10}, 0); err != nil {
		t.Fatalf("CompareAndSet on a new key: %v", err)
	}
	w, err := c.Watch(ctx, "api", &got)
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextConfigEvent(ctx, t, w); ev.Type != config.EventTypePut || ev.Value.(apiLimits).QPS != 10 {
		t.Fatalf("first watch event %+v, want the current value", ev)
	}
	if err := c.CompareAndSet(ctx, "api", apiLimits{QPS: 99}, 7); !errors.Is(err, config.ErrVersionMismatch) {
		t.Fatalf("CompareAndSet with a stale version: %v, want ErrVersionMismatch", err)
	}
	if err := c.CompareAndSet(ctx, "api", apiLimits{QPS: 20, Owner: "ops"}, 1); err != nil {
		t.Fatalf("CompareAndSet with the right version: %v", err)
	}
	if ev := nextConfigEvent(ctx, t, w); ev.Value.(apiLimits) != (apiLimits{QPS: 20, Owner: "ops"}) || ev.Version != 2 {
		t.Fatalf("watch event %+v, want QPS 20 at version 2", ev)
	}
	if err := c.Set(ctx, "api", apiLimits{QPS: 30}); err != nil {
		t.Fatal(err)
	}
	if ev := nextConfigEvent(ctx, t, w); ev.Value.(apiLimits).QPS != 30 {
		t.Fatalf("watch event %+v, want QPS 30", ev)
	}
	if err := c.Get(ctx, "api", &got); err != nil || got.QPS != 30 {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	w.Close()
	for range w.Chan() {
	}
	if err := c.SetBatch(ctx, map[string]interface{}{"svc/a": apiLimits{QPS: 1}, "svc/b": apiLimits{QPS: 2}}); err != nil {
		t.Fatal(err)
	}
	all := map[string]apiLimits{}
	if err := c.GetPrefix(ctx, "svc/", &all); err != nil || len(all) != 2 || all["svc/b"].QPS != 2 {
		t.Fatalf("GetPrefix: %+v, %v", all, err)
	}
	if keys, err := c.List(ctx, "svc/"); err != nil || len(keys) != 2 {
		t.Fatalf("List: %v, %v", keys, err)
	}
	if n, err := c.DeletePrefix(ctx, "svc/"); err != nil || n != 2 {
		t.Fatalf("DeletePrefix: %d, %v", n, err)
	}
}

func nextConfigEvent(ctx context.Context, t *testing.T, w config.Watcher[any]) config.ConfigEvent[any] {
	t.Helper()
	select {
	case ev, ok := <-w.Chan():
		if !ok {
			t.Fatal("config watch closed")
		}
		if ev.Err != nil {
			t.Fatalf("config event error: %v", ev.Err)
		}
		return ev
	case <-ctx.Done():
		t.Fatal("no config event")
	}
	return config.ConfigEvent[any]{}
}

// testCoordUnreachable: New retries its connectivity check per the
// RetryConfig and then reports the failure.
func testCoordUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = coord.New(testContext(t, scenarioTimeout), coord.CoordinatorConfig{
		Endpoints: []string{addr}, Timeout: 300 * time.Millisecond,
		RetryConfig: &coord.RetryConfig{MaxAttempts: 2, InitialDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Multiplier: 2},
	})
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("New against a closed port: %v", err)
	}
}
