package coord_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/metastore-io/metastore/pkg/coord"
	"github.com/metastore-io/metastore/pkg/coord/config"
	"github.com/metastore-io/metastore/pkg/coord/lock"
	"github.com/metastore-io/metastore/pkg/coord/registry"
)

// The design's interfaces, method by method, with its exact signatures.
var (
	_ func(context.Context, coord.CoordinatorConfig, ...coord.Option) (coord.Provider, error) = coord.New
	_ func(*slog.Logger) coord.Option                                                         = coord.WithLogger

	_ func(coord.Provider) lock.DistributedLock     = coord.Provider.Lock
	_ func(coord.Provider) registry.ServiceRegistry = coord.Provider.Registry
	_ func(coord.Provider) config.ConfigCenter      = coord.Provider.Config
	_ func(coord.Provider) error                    = coord.Provider.Close

	_ func(lock.DistributedLock, context.Context, string, time.Duration) (lock.Lock, error) = lock.DistributedLock.Acquire
	_ func(lock.DistributedLock, context.Context, string, time.Duration) (lock.Lock, error) = lock.DistributedLock.TryAcquire
	_ func(lock.Lock, context.Context) error                                                = lock.Lock.Unlock
	_ func(lock.Lock, context.Context) (time.Duration, error)                               = lock.Lock.TTL
	_ func(lock.Lock) string                                                                = lock.Lock.Key
	_ func(lock.Lock, context.Context) (bool, error)                                        = lock.Lock.Renew
	_ func(lock.Lock, context.Context) (bool, error)                                        = lock.Lock.IsExpired

	_ func(registry.ServiceRegistry, context.Context, registry.ServiceInfo, time.Duration) error    = registry.ServiceRegistry.Register
	_ func(registry.ServiceRegistry, context.Context, string) error                                 = registry.ServiceRegistry.Unregister
	_ func(registry.ServiceRegistry, context.Context, string) ([]registry.ServiceInfo, error)       = registry.ServiceRegistry.Discover
	_ func(registry.ServiceRegistry, context.Context, string) (<-chan registry.ServiceEvent, error) = registry.ServiceRegistry.Watch
	_ func(registry.ServiceRegistry, context.Context, string) (*grpc.ClientConn, error)             = registry.ServiceRegistry.GetConnection

	_ func(config.ConfigCenter, context.Context, string, interface{}) error                        = config.ConfigCenter.Get
	_ func(config.ConfigCenter, context.Context, string, interface{}) error                        = config.ConfigCenter.Set
	_ func(config.ConfigCenter, context.Context, string, interface{}) (config.Watcher[any], error) = config.ConfigCenter.Watch
	_ func(config.ConfigCenter, context.Context, string, interface{}, int64) error                 = config.ConfigCenter.CompareAndSet
	_ func(config.Watcher[any]) <-chan config.ConfigEvent[any]                                     = config.Watcher[any].Chan
	_ func(config.Watcher[any])                                                                    = config.Watcher[any].Close

	_ = coord.RetryConfig{MaxAttempts: 3, InitialDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second, Multiplier: 2.0}
	_ = []error{coord.ErrLockExpired, coord.ErrLockNotHeld, coord.ErrLockConflict}
)

// businessLogic is the design's standard usage pattern, verbatim in shape.
func businessLogic(coordinator coord.Provider, doBusiness func() error) error {
	ctx := context.Background()
	lock, err := coordinator.Lock().Acquire(ctx, "business-key", time.Second*30)
	if err != nil {
		return fmt.Errorf("failed to acquire lock: %w", err)
	}
	defer lock.Unlock(ctx)
	if err := doBusiness(); err != nil {
		return err
	}
	return lock.Unlock(ctx)
}

// services uses the registry and config centre as the design shows.
func services(ctx context.Context, coordinator coord.Provider) error {
	if err := coordinator.Registry().Register(ctx, registry.ServiceInfo{ID: "user-1", Name: "user-service",
		Address: "10.0.0.7", Port: 9000}, 10*time.Second); err != nil {
		return err
	}
	conn, err := coordinator.Registry().GetConnection(ctx, "user-service")
	if err != nil {
		return err
	}
	defer conn.Close()
	var dbConfig struct{ DSN string }
	if err := coordinator.Config().Get(ctx, "db", &dbConfig); err != nil {
		return err
	}
	w, err := coordinator.Config().Watch(ctx, "db", &dbConfig)
	if err != nil {
		return err
	}
	defer w.Close()
	for ev := range w.Chan() {
		_ = ev.Value
	}
	return coordinator.Config().CompareAndSet(ctx, "db", dbConfig, 3)
}

var _, _ = businessLogic, services

// TestValidationNeedsNoServer: bad configurations and bad lock requests
// fail with ValidationError before any round trip.
func TestValidationNeedsNoServer(t *testing.T) {
	ctx := context.Background()
	var ve *coord.ValidationError
	for _, cfg := range []coord.CoordinatorConfig{
		{},
		{Endpoints: []string{"127.0.0.1:1"}, RetryConfig: &coord.RetryConfig{MaxAttempts: 0, Multiplier: 2}},
		{Endpoints: []string{"127.0.0.1:1"}, RetryConfig: &coord.RetryConfig{MaxAttempts: 2, Multiplier: 0.5}},
	} {
		if _, err := coord.New(ctx, cfg); !errors.As(err, &ve) {
			t.Errorf("New(%+v): %v, want a ValidationError", cfg, err)
		}
	}
	f := lock.NewFactory(nil, "locks/", nil, nil)
	for _, c := range []struct {
		key string
		ttl time.Duration
	}{{"", time.Second}, {"k", 0}, {"k", -time.Second}} {
		if _, err := f.Acquire(ctx, c.key, c.ttl); !errors.As(err, &ve) {
			t.Errorf("Acquire(%q, %v): %v, want a ValidationError", c.key, c.ttl, err)
		}
		if _, err := f.TryAcquire(ctx, c.key, c.ttl); !errors.As(err, &ve) {
			t.Errorf("TryAcquire(%q, %v): %v, want a ValidationError", c.key, c.ttl, err)
		}
	}
}
