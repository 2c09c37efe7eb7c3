package sdk

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency"
	"github.com/metastore-io/metastore/pkg/concurrency/lock"
	"github.com/metastore-io/metastore/test/framework"
)

// TestLock runs pkg/concurrency/lock, the fencing lock, against both
// servers.
func TestLock(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{}, func(t *testing.T, e *env) {
		t.Run("FencingPausedHolder", func(t *testing.T) { t.Parallel(); testFencingPausedHolder(t, e) })
		t.Run("FencingStoppedProcess", func(t *testing.T) { t.Parallel(); testFencingStoppedProcess(t, e) })
		t.Run("TokensIncrease", func(t *testing.T) { t.Parallel(); testTokensIncrease(t, e) })
		t.Run("HeldTryLockRenewTTL", func(t *testing.T) { t.Parallel(); testHeldTryLockRenewTTL(t, e) })
		t.Run("LostOnRevokeAndDelete", func(t *testing.T) { t.Parallel(); testLostOnRevokeAndDelete(t, e) })
		t.Run("SharesLayoutWithMutex", func(t *testing.T) { t.Parallel(); testSharesLayoutWithMutex(t, e) })
	})
}

func newLocker(t *testing.T, cli *clientv3.Client, prefix string) *lock.Locker {
	t.Helper()
	l, err := lock.NewLocker(lock.Config{Client: cli, Prefix: prefix, RetryInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testFencingPausedHolder: a holder whose renewal stops (a blocked
// goroutine: manual renewal, never renewed) cannot complete a guarded write
// once a new holder took the lock, and the new holder's token is higher.
func testFencingPausedHolder(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t) + "/"
	resource := keyPrefix(t) + "-resource"
	stalled, err := newLocker(t, e.newClient(t), pfx).Lock(ctx, "job", lock.WithTTL(shortTTL*time.Second), lock.WithManualRenewal())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stalled.Guard().Do(ctx, clientv3.OpPut(resource, "stalled-1")); err != nil {
		t.Fatalf("guarded write while holding: %v", err)
	}

	// The stalled holder now does nothing; the next contender waits for
	// its lease to run out.
	next, err := newLocker(t, e.newClient(t), pfx).Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unlock(ctx)
	if next.FencingToken() <= stalled.FencingToken() {
		t.Fatalf("new holder's token %d is not above the stalled holder's %d", next.FencingToken(), stalled.FencingToken())
	}
	if _, err := next.Guard().Do(ctx, clientv3.OpPut(resource, "next")); err != nil {
		t.Fatalf("new holder's guarded write: %v", err)
	}

	// The stalled holder wakes up and tries to write: refused, at the
	// server as well as locally.
	raw, err := e.newClient(t).Txn(ctx).If(stalled.Guard().Cmp()).Then(clientv3.OpPut(resource, "stalled-raw")).Commit()
	if err != nil || raw.Succeeded {
		t.Fatalf("raw txn under the stalled holder's guard: succeeded=%v err=%v, want refused", raw != nil && raw.Succeeded, err)
	}
	if _, err := stalled.Guard().Do(ctx, clientv3.OpPut(resource, "stalled-2")); !errors.Is(err, lock.ErrOwnershipLost) {
		t.Fatalf("stalled holder's guarded write = %v, want ErrOwnershipLost", err)
	}
	select {
	case <-stalled.Lost():
	default:
		t.Fatal("Lost not closed after the stalled holder's lock expired")
	}
	if !stalled.IsExpired() {
		t.Fatal("IsExpired = false for a lost lock")
	}
	if err := stalled.Unlock(ctx); !errors.Is(err, lock.ErrOwnershipLost) {
		t.Fatalf("Unlock by the stalled holder = %v, want ErrOwnershipLost", err)
	}
	if err := stalled.Unlock(ctx); !errors.Is(err, lock.ErrLockNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrLockNotHeld", err)
	}
	resp, err := e.newClient(t).Get(ctx, resource)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Kvs[0].Value); got != "next" {
		t.Fatalf("resource = %q, want the new holder's write", got)
	}
	if keys := keysUnder(ctx, t, e.newClient(t), pfx+"job/"); len(keys) != 1 || keys[0] != next.Key() {
		t.Fatalf("keys = %v, want only the new holder's; the stalled holder's Unlock must not delete it", keys)
	}
}

// testTokensIncrease: successive holders of one name, through different
// Lockers, get strictly increasing fencing tokens.
func testTokensIncrease(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t) + "/"
	lockers := []*lock.Locker{newLocker(t, e.newClient(t), pfx), newLocker(t, e.newClient(t), pfx)}
	last := int64(0)
	for i := range 6 {
		h, err := lockers[i%2].Lock(ctx, "name")
		if err != nil {
			t.Fatal(err)
		}
		if h.FencingToken() <= last {
			t.Fatalf("holder %d token %d, previous %d: not increasing", i, h.FencingToken(), last)
		}
		last = h.FencingToken()
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// testHeldTryLockRenewTTL: re-locking a held name in the same Locker is
// refused, TryLock from elsewhere reports ErrLocked, TTL and Renew work,
// and a handle released by Unlock refuses further use.
func testHeldTryLockRenewTTL(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t) + "/"
	cli := e.newClient(t)
	l := newLocker(t, cli, pfx)
	h, err := l.Lock(ctx, "res", lock.WithTTL(30*time.Second), lock.WithOwner("worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lock(ctx, "res"); !errors.Is(err, lock.ErrLockAlreadyHeld) {
		t.Fatalf("second Lock in the same Locker = %v, want ErrLockAlreadyHeld", err)
	}
	other := newLocker(t, e.newClient(t), pfx)
	if _, err := other.TryLock(ctx, "res"); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("TryLock of a held lock = %v, want ErrLocked", err)
	}
	if keys := keysUnder(ctx, t, cli, pfx+"res/"); len(keys) != 1 {
		t.Fatalf("keys after a failed TryLock = %v, want only the holder's", keys)
	}
	resp, err := cli.Get(ctx, h.Key())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "worker-1" {
		t.Fatalf("holder key = %v, %v; want value worker-1", resp, err)
	}
	ttl, err := h.TTL(ctx)
	if err != nil || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("TTL = %v, %v; want in (0, 30s]", ttl, err)
	}
	if err := h.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if h.IsExpired() {
		t.Fatal("IsExpired right after Renew")
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Renew(ctx); !errors.Is(err, lock.ErrLockNotHeld) {
		t.Fatalf("Renew after Unlock = %v, want ErrLockNotHeld", err)
	}
	if _, err := h.Guard().Do(ctx, clientv3.OpPut(pfx+"x", "y")); !errors.Is(err, lock.ErrLockNotHeld) {
		t.Fatalf("guarded write after Unlock = %v, want ErrLockNotHeld", err)
	}
	h2, err := other.TryLock(ctx, "res")
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	if err := h2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The name is free in the first Locker again.
	h3, err := l.TryLock(ctx, "res")
	if err != nil {
		t.Fatalf("TryLock in the first Locker after its Unlock: %v", err)
	}
	if err := h3.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// awaitLost waits for a lock's Lost channel.
func awaitLost(ctx context.Context, t *testing.T, h *lock.Lock, what string) {
	t.Helper()
	select {
	case <-h.Lost():
		if !errors.Is(h.Err(), lock.ErrOwnershipLost) {
			t.Fatalf("Err after %s = %v, want ErrOwnershipLost", what, h.Err())
		}
	case <-ctx.Done():
		t.Fatalf("Lost not closed after %s", what)
	}
}

// testLostOnRevokeAndDelete: losing the lease (revoked behind the holder's
// back) or the key (deleted by an operator) closes Lost.
func testLostOnRevokeAndDelete(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t) + "/"
	cli := e.newClient(t)
	l := newLocker(t, cli, pfx)

	revoked, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, revoked.Lease()); err != nil {
		t.Fatal(err)
	}
	awaitLost(ctx, t, revoked, "revoking the lease")
	if _, err := revoked.TTL(ctx); !errors.Is(err, lock.ErrOwnershipLost) {
		t.Fatalf("TTL of a revoked lock = %v, want ErrOwnershipLost", err)
	}

	deleted, err := l.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, deleted.Key()); err != nil {
		t.Fatal(err)
	}
	awaitLost(ctx, t, deleted, "deleting the key")
	// A lost lock no longer blocks its name in the same Locker.
	again, err := l.TryLock(ctx, "b")
	if err != nil {
		t.Fatalf("TryLock after the previous handle was lost: %v", err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := deleted.Unlock(ctx); !errors.Is(err, lock.ErrOwnershipLost) {
		t.Fatalf("Unlock of a lost lock = %v, want ErrOwnershipLost", err)
	}
}

// testSharesLayoutWithMutex: with an empty prefix a Locker and etcd's
// mutex (pkg/concurrency, as used by `etcdctl lock`) exclude each other.
func testSharesLayoutWithMutex(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	name := keyPrefix(t) + "/shared"
	m := concurrency.NewMutex(newSession(t, cli), name)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, e.newClient(t), "")
	if _, err := l.TryLock(ctx, name); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("Locker.TryLock while the mutex holds = %v, want ErrLocked", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := l.TryLock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Fatalf("mutex TryLock while the Locker holds = %v, want ErrLocked", err)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
