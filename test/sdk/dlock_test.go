package sdk

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/dlock"
	"github.com/metastore-io/metastore/test/framework"
	"github.com/metastore-io/metastore/test/testutil"
)

// TestDLock runs the dlock component (pkg/dlock) against both servers:
// every method, option, error and log event of its design.
func TestDLock(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{}, func(t *testing.T, e *env) {
		t.Run("LockUnlockAndErrors", func(t *testing.T) { t.Parallel(); testDLockBasics(t, e) })
		t.Run("LockBlocksUntilReleased", func(t *testing.T) { t.Parallel(); testDLockBlocks(t, e) })
		t.Run("TTLAndWatchdog", func(t *testing.T) { t.Parallel(); testDLockWatchdog(t, e) })
		t.Run("OwnershipLost", func(t *testing.T) { t.Parallel(); testDLockOwnershipLost(t, e) })
		t.Run("CloseReleases", func(t *testing.T) { t.Parallel(); testDLockClose(t, e) })
	})
}

// logBuffer collects JSON log records; safe for concurrent writers.
type logBuffer struct{ testutil.SyncBuffer }

// has reports whether a record with msg and component=dlock was logged.
func (b *logBuffer) has(msg string) bool {
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, `"component":"dlock"`) {
			return true
		}
	}
	return false
}

func newDLocker(t *testing.T, cli *clientv3.Client, prefix string, logs *logBuffer, cfg dlock.Config) dlock.Locker {
	t.Helper()
	cfg.Prefix = prefix
	opts := []dlock.Option{dlock.WithEtcdConnector(dlock.ClientConnector(cli))}
	if logs != nil {
		opts = append(opts, dlock.WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	l, err := dlock.New(&cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// testDLockBasics: Lock, TryLock on a free key (true) and on a key
// another Locker holds (false, nil), ErrLockAlreadyHeld within one
// Locker, Unlock, ErrLockNotHeld, and the acquired/released log events.
func testDLockBasics(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	logs := &logBuffer{}
	pfx := keyPrefix(t) + ":"
	a := newDLocker(t, e.newClient(t), pfx, logs, dlock.Config{Driver: dlock.DriverEtcd})
	b := newDLocker(t, e.newClient(t), pfx, nil, dlock.Config{Driver: dlock.DriverMetaStore})
	if err := a.Lock(ctx, "res"); err != nil {
		t.Fatal(err)
	}
	if err := a.Lock(ctx, "res"); !errors.Is(err, dlock.ErrLockAlreadyHeld) {
		t.Fatalf("Lock of a key the Locker holds: %v, want ErrLockAlreadyHeld", err)
	}
	if ok, err := a.TryLock(ctx, "res"); ok || !errors.Is(err, dlock.ErrLockAlreadyHeld) {
		t.Fatalf("TryLock of a key the Locker holds: %v, %v, want ErrLockAlreadyHeld", ok, err)
	}
	if ok, err := b.TryLock(ctx, "res"); ok || err != nil {
		t.Fatalf("TryLock of a key another Locker holds: %v, %v, want false, nil", ok, err)
	}
	if ok, err := b.TryLock(ctx, "other"); !ok || err != nil {
		t.Fatalf("TryLock of a free key: %v, %v", ok, err)
	}
	if err := b.Unlock(ctx, "res"); !errors.Is(err, dlock.ErrLockNotHeld) {
		t.Fatalf("Unlock of a key the Locker does not hold: %v, want ErrLockNotHeld", err)
	}
	if err := a.Unlock(ctx, "res"); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlock(ctx, "res"); !errors.Is(err, dlock.ErrLockNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrLockNotHeld", err)
	}
	if ok, err := b.TryLock(ctx, "res"); !ok || err != nil {
		t.Fatalf("TryLock after the holder unlocked: %v, %v", ok, err)
	}
	for _, msg := range []string{"lock acquired", "lock released"} {
		if !logs.has(msg) {
			t.Errorf("no %q record with component=dlock in:\n%s", msg, logs)
		}
	}
}

// testDLockBlocks: Lock waits for the holder's Unlock.
func testDLockBlocks(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t) + ":"
	a := newDLocker(t, e.newClient(t), pfx, nil, dlock.Config{})
	b := newDLocker(t, e.newClient(t), pfx, nil, dlock.Config{})
	if err := a.Lock(ctx, "res"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx, "res") }()
	if err := waitForKeys(ctx, e.newClient(t), pfx+"res/", 2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("Lock returned while another held the key: %v", err)
	default:
	}
	if err := a.Unlock(ctx, "res"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Lock: %v", err)
	}
}

// grantedTTL is the TTL of the lease under the only key below prefix.
func grantedTTL(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) (clientv3.LeaseID, *clientv3.LeaseTimeToLiveResponse) {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("keys under %s: %v (%d)", prefix, err, len(resp.Kvs))
	}
	id := clientv3.LeaseID(resp.Kvs[0].Lease)
	ttl, err := cli.TimeToLive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return id, ttl
}

// testDLockWatchdog: the default TTL is 10 s, WithTTL overrides it, and
// the watchdog keeps a short-TTL lock alive past several TTLs.
func testDLockWatchdog(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t) + ":"
	cli := e.newClient(t)
	l := newDLocker(t, e.newClient(t), pfx, nil, dlock.Config{})
	if err := l.Lock(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if _, ttl := grantedTTL(ctx, t, cli, pfx+"default/"); ttl.GrantedTTL != 10 {
		t.Fatalf("default TTL %d s, want 10", ttl.GrantedTTL)
	}
	// 4 s rather than shortTTL: renewal runs every TTL/3, and on a loaded
	// 2-core machine a 2 s lease renewed every 0.67 s was seen to lapse
	// (on etcd too).
	const watchdogTTL = 4
	if err := l.Lock(ctx, "short", dlock.WithTTL(watchdogTTL*time.Second)); err != nil {
		t.Fatal(err)
	}
	id, ttl := grantedTTL(ctx, t, cli, pfx+"short/")
	if ttl.GrantedTTL != watchdogTTL {
		t.Fatalf("WithTTL(%ds) granted %d s", watchdogTTL, ttl.GrantedTTL)
	}
	// Past two TTLs the lease must still be there: renewed.
	deadline := time.Now().Add(2 * watchdogTTL * time.Second)
	for time.Now().Before(deadline) {
		ttl, err := cli.TimeToLive(ctx, id)
		if err != nil || ttl.TTL <= 0 {
			t.Fatalf("the watchdog let the lease lapse: %+v, %v", ttl, err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err := l.Unlock(ctx, "short"); err != nil {
		t.Fatalf("Unlock after renewals: %v", err)
	}
}

// testDLockOwnershipLost: the lease is revoked behind the holder's back;
// the watchdog logs "watchdog renew failed" and "ownership lost", and
// Unlock reports ErrOwnershipLost.
func testDLockOwnershipLost(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t) + ":"
	logs := &logBuffer{}
	cli := e.newClient(t)
	l := newDLocker(t, e.newClient(t), pfx, logs, dlock.Config{})
	if err := l.Lock(ctx, "res"); err != nil {
		t.Fatal(err)
	}
	id, _ := grantedTTL(ctx, t, cli, pfx+"res/")
	if _, err := cli.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	for !logs.has("ownership lost") {
		select {
		case <-ctx.Done():
			t.Fatalf("no ownership lost record: %s", logs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !logs.has("watchdog renew failed") {
		t.Errorf("no watchdog renew failed record: %s", logs)
	}
	if err := l.Unlock(ctx, "res"); !errors.Is(err, dlock.ErrOwnershipLost) {
		t.Fatalf("Unlock of a lost lock: %v, want ErrOwnershipLost", err)
	}
}

// testDLockClose: Close releases every lock still held and refuses
// further use.
func testDLockClose(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t) + ":"
	cli := e.newClient(t)
	l := newDLocker(t, e.newClient(t), pfx, nil, dlock.Config{})
	for _, k := range []string{"a", "b"} {
		if err := l.Lock(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if keys := keysUnder(ctx, t, cli, pfx); len(keys) != 0 {
		t.Fatalf("keys left after Close: %v", keys)
	}
	if err := l.Lock(ctx, "a"); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Lock after Close: %v, want ErrClosed", err)
	}
}
