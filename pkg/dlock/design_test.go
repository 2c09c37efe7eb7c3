package dlock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/dlock"
)

// The Locker interface exactly as the design has it: Lock (blocking),
// TryLock (non-blocking), Unlock, Close.
var (
	_ func(dlock.Locker, context.Context, string, ...dlock.LockOption) error         = dlock.Locker.Lock
	_ func(dlock.Locker, context.Context, string, ...dlock.LockOption) (bool, error) = dlock.Locker.TryLock
	_ func(dlock.Locker, context.Context, string) error                              = dlock.Locker.Unlock
	_ func(dlock.Locker) error                                                       = dlock.Locker.Close
	_ func(*dlock.Config, ...dlock.Option) (dlock.Locker, error)                     = dlock.New
	_ func(time.Duration) dlock.LockOption                                           = dlock.WithTTL
	_ func(*slog.Logger) dlock.Option                                                = dlock.WithLogger
	_ func(dlock.Connector) dlock.Option                                             = dlock.WithEtcdConnector
	_                                                                                = []error{dlock.ErrLockNotHeld, dlock.ErrLockAlreadyHeld, dlock.ErrOwnershipLost, dlock.ErrConfigNil, dlock.ErrConnectorNil}
)

// criticalSection is the design's usage pattern: lock, defer unlock, work;
// TryLock for optional work; errors told apart by kind.
func criticalSection(ctx context.Context, client *clientv3.Client, logger *slog.Logger) error {
	locker, err := dlock.New(&dlock.Config{Driver: dlock.DriverEtcd, Prefix: "myapp:lock:", DefaultTTL: 10 * time.Second,
		RetryInterval: 100 * time.Millisecond}, dlock.WithEtcdConnector(dlock.ClientConnector(client)), dlock.WithLogger(logger))
	if err != nil {
		return err
	}
	defer locker.Close()
	if err := locker.Lock(ctx, "inventory:42", dlock.WithTTL(5*time.Second)); err != nil {
		return err
	}
	defer locker.Unlock(ctx, "inventory:42")
	ok, err := locker.TryLock(ctx, "cron:daily")
	switch {
	case errors.Is(err, dlock.ErrLockAlreadyHeld):
		return nil
	case err != nil:
		return err
	case ok:
		return locker.Unlock(ctx, "cron:daily")
	}
	return nil
}

var _ = criticalSection

// TestConstructionErrors: the configuration errors need no server.
func TestConstructionErrors(t *testing.T) {
	if _, err := dlock.New(nil); !errors.Is(err, dlock.ErrConfigNil) {
		t.Fatalf("New(nil): %v, want ErrConfigNil", err)
	}
	if _, err := dlock.New(&dlock.Config{}); !errors.Is(err, dlock.ErrConnectorNil) {
		t.Fatalf("New without a connector: %v, want ErrConnectorNil", err)
	}
	if _, err := dlock.New(&dlock.Config{}, dlock.WithEtcdConnector(dlock.ClientConnector(nil))); !errors.Is(err, dlock.ErrConnectorNil) {
		t.Fatalf("New with a nil client: %v, want ErrConnectorNil", err)
	}
	if _, err := dlock.New(&dlock.Config{Driver: dlock.DriverRedis}, dlock.WithEtcdConnector(dlock.ClientConnector(&clientv3.Client{}))); err == nil {
		t.Fatal("the redis driver was accepted")
	}
}
