package lock

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/concurrency/queue"
)

// Acquisition against a server is tested end to end in test/sdk, on
// MetaStore and etcd; these tests cover the decisions made locally.

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.Canceled, false},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), false},
		{errKeyLostWhileWaiting, true},
		{fmt.Errorf("wait for earlier holders: %w", queue.ErrWatchLost), true},
		{rpctypes.ErrLeaseNotFound, true},
		{rpctypes.ErrNoLeader, true},
		{fmt.Errorf("join queue: %w", rpctypes.ErrTimeoutDueToLeaderFail), true},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{fmt.Errorf("grant lease: %w", status.Error(codes.Unavailable, "x")), true},
		{status.Error(codes.PermissionDenied, "no"), false},
		{status.Error(codes.Unimplemented, "unknown service"), false},
		{ErrLocked, false},
		{errors.New("something else"), false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestConfigAndArgumentValidation(t *testing.T) {
	if _, err := NewLocker(Config{}); err == nil {
		t.Error("NewLocker without a client succeeded")
	}
	cli := clientv3.NewCtxClient(context.Background())
	if _, err := NewLocker(Config{Client: cli, TTL: -1}); err == nil {
		t.Error("NewLocker with a negative TTL succeeded")
	}
	l, err := NewLocker(Config{Client: cli})
	if err != nil {
		t.Fatal(err)
	}
	if l.ttl != DefaultTTL || l.retryInterval != DefaultRetryInterval || l.reqTimeout != DefaultRequestTimeout {
		t.Errorf("defaults = %v, %v, %v", l.ttl, l.retryInterval, l.reqTimeout)
	}
	if _, err := NewLocker(Config{Client: cli, RequestTimeout: -1}); err == nil {
		t.Error("NewLocker with a negative request timeout succeeded")
	}
	ctx := context.Background()
	for _, name := range []string{"", "a\x00b"} {
		if _, err := l.Lock(ctx, name); err == nil {
			t.Errorf("Lock(%q) succeeded", name)
		}
	}
	if _, err := l.TryLock(ctx, "x", WithTTL(0)); err == nil {
		t.Error("TryLock with a zero TTL succeeded")
	}
	if _, err := l.TryLock(ctx, "x", WithRetryInterval(-1)); err == nil {
		t.Error("TryLock with a negative retry interval succeeded")
	}
}

// TestAlreadyHeldIsLocal: a name the Locker holds is refused before any
// request is made (the client here has no connection at all).
func TestAlreadyHeldIsLocal(t *testing.T) {
	l, err := NewLocker(Config{Client: clientv3.NewCtxClient(context.Background())})
	if err != nil {
		t.Fatal(err)
	}
	h := bareLock(l, "job")
	l.register(h)
	if _, err := l.Lock(context.Background(), "job"); !errors.Is(err, ErrLockAlreadyHeld) {
		t.Fatalf("Lock of a held name = %v, want ErrLockAlreadyHeld", err)
	}
	// A second handle acquiring the name marks the first lost.
	newer := bareLock(l, "job")
	l.register(newer)
	select {
	case <-h.Lost():
	default:
		t.Fatal("older handle not marked lost when a newer one registered")
	}
	if !errors.Is(context.Cause(h.Context()), ErrOwnershipLost) {
		t.Fatalf("the lost handle's context: cause %v, want ErrOwnershipLost", context.Cause(h.Context()))
	}
	if !l.holding("job") {
		t.Fatal("newer handle not recorded")
	}
	l.forget(h) // the stale handle must not drop the newer one
	if !l.holding("job") {
		t.Fatal("forgetting the stale handle dropped the newer one")
	}
	l.forget(newer)
	if l.holding("job") {
		t.Fatal("still holding after forget")
	}
}

// bareLock is a handle of name with no lease behind it.
func bareLock(l *Locker, name string) *Lock {
	h := &Lock{locker: l, name: name, lost: make(chan struct{})}
	h.holdCtx, h.cancelHold = context.WithCancelCause(context.Background())
	return h
}
