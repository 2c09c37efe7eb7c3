package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	fenced "github.com/metastore-io/metastore/pkg/concurrency/lock"
	"github.com/metastore-io/metastore/pkg/coord/validation"
)

// The errors of the design.
var (
	ErrLockExpired  = errors.New("lock has expired")
	ErrLockNotHeld  = errors.New("lock not held")
	ErrLockConflict = errors.New("lock conflict")
)

// ValidationError is a request refused before reaching the store.
type ValidationError = validation.Error

// DistributedLock acquires locks.
type DistributedLock interface {
	Acquire(ctx context.Context, key string, ttl time.Duration) (Lock, error)
	TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lock, error)
}

// Lock is a held lock.
type Lock interface {
	Unlock(ctx context.Context) error
	TTL(ctx context.Context) (time.Duration, error)
	Key() string
	Renew(ctx context.Context) (bool, error)
	IsExpired(ctx context.Context) (bool, error)
}

// Factory implements DistributedLock over a client.
type Factory struct {
	client  *clientv3.Client
	prefix  string
	log     *slog.Logger
	metrics *Metrics
}

// NewFactory returns locks under prefix on client; metrics may be nil.
func NewFactory(client *clientv3.Client, prefix string, logger *slog.Logger, metrics *Metrics) *Factory {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if metrics == nil {
		metrics = NewMetrics()
	}
	return &Factory{client: client, prefix: prefix, log: logger, metrics: metrics}
}

// Acquire waits until it holds key or ctx ends.
func (f *Factory) Acquire(ctx context.Context, key string, ttl time.Duration) (Lock, error) {
	return f.acquire(ctx, key, ttl, true)
}

// TryAcquire takes key if it is free, else fails with ErrLockConflict.
func (f *Factory) TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lock, error) {
	return f.acquire(ctx, key, ttl, false)
}

func validate(key string, ttl time.Duration) error {
	switch {
	case key == "":
		return &ValidationError{Field: "key", Reason: "empty"}
	case strings.Contains(key, "\x00"):
		return &ValidationError{Field: "key", Reason: "contains NUL"}
	case ttl <= 0:
		return &ValidationError{Field: "ttl", Reason: fmt.Sprintf("%v is not positive", ttl)}
	}
	return nil
}

func (f *Factory) acquire(ctx context.Context, key string, ttl time.Duration, blocking bool) (Lock, error) {
	if err := validate(key, ttl); err != nil {
		return nil, err
	}
	// One Locker per acquisition: the design's session per lock, so two
	// acquisitions of one key in this process exclude each other.
	locker, err := fenced.NewLocker(fenced.Config{Client: f.client, Prefix: f.prefix, TTL: ttl, Logger: f.log})
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w", key, err)
	}
	f.log.Debug("acquiring lock", "key", f.prefix+key, "ttl", ttl, "blocking", blocking)
	start := time.Now()
	var h *fenced.Lock
	if blocking {
		h, err = locker.Lock(ctx, key)
	} else {
		h, err = locker.TryLock(ctx, key)
	}
	f.metrics.WaitSeconds.Observe(time.Since(start).Seconds())
	switch {
	case errors.Is(err, fenced.ErrLocked):
		f.metrics.Acquires.WithLabelValues("conflict").Inc()
		return nil, fmt.Errorf("lock %q: %w", key, ErrLockConflict)
	case err != nil:
		f.metrics.Acquires.WithLabelValues("failure").Inc()
		f.log.Warn("lock acquisition failed", "key", f.prefix+key, "blocking", blocking, "error", err)
		return nil, err
	}
	f.metrics.Acquires.WithLabelValues("success").Inc()
	f.log.Info("lock acquired", "key", h.Key(), "lease", int64(h.Lease()), "token", h.FencingToken())
	return &heldLock{f: f, h: h, acquired: time.Now()}, nil
}

// heldLock is a Lock on a fenced lock handle.
type heldLock struct {
	f        *Factory
	h        *fenced.Lock
	acquired time.Time
	released atomic.Bool
	once     sync.Once // observes the hold time once
}

func (l *heldLock) Key() string { return l.h.Key() }

// Holder is implemented by every Lock a Factory returns, beyond the
// design's interface: the holder's own loss signal.
type Holder interface {
	// Context is cancelled when the lock is lost (the holder deadline
	// passed, the lease or key is gone; its cause wraps ErrLockExpired)
	// or released (cause ErrLockNotHeld). Run the critical section
	// under it.
	Context() context.Context
}

var _ Holder = (*heldLock)(nil)

func (l *heldLock) Context() context.Context {
	return l.h.ContextAs(ErrLockExpired, fmt.Errorf("lock %s: %w", l.h.Key(), ErrLockNotHeld))
}

// Unlock releases the lock: ErrLockNotHeld if it was already released,
// ErrLockExpired if it expired while held.
func (l *heldLock) Unlock(ctx context.Context) error {
	err := l.h.Unlock(ctx)
	switch {
	case errors.Is(err, fenced.ErrLockNotHeld):
		return fmt.Errorf("unlock %s: %w", l.h.Key(), ErrLockNotHeld)
	case errors.Is(err, fenced.ErrOwnershipLost):
		l.ended()
		return fmt.Errorf("unlock %s: %w: %w", l.h.Key(), ErrLockExpired, err)
	case err != nil:
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// No answer within the request timeout: the handle gave the
			// lock up (its key goes when the lease expires).
			l.ended()
		}
		return err
	}
	l.ended()
	l.f.log.Info("lock released", "key", l.h.Key(), "lease", int64(l.h.Lease()), "held", time.Since(l.acquired))
	return nil
}

func (l *heldLock) ended() {
	l.released.Store(true)
	l.once.Do(func() { l.f.metrics.HoldSeconds.Observe(time.Since(l.acquired).Seconds()) })
}

// TTL is how long the lease has left on the server.
func (l *heldLock) TTL(ctx context.Context) (time.Duration, error) {
	if l.released.Load() {
		return 0, ErrLockNotHeld
	}
	ttl, err := l.h.TTL(ctx)
	if errors.Is(err, fenced.ErrOwnershipLost) {
		return 0, fmt.Errorf("%w: %w", ErrLockExpired, err)
	}
	return ttl, err
}

// Renew renews the lease once: true when renewed; false with
// ErrLockExpired when the lease is gone.
func (l *heldLock) Renew(ctx context.Context) (bool, error) {
	if l.released.Load() {
		return false, ErrLockNotHeld
	}
	err := l.h.Renew(ctx)
	switch {
	case err == nil:
		l.f.metrics.Renews.WithLabelValues("success").Inc()
		return true, nil
	case errors.Is(err, fenced.ErrOwnershipLost):
		l.f.metrics.Renews.WithLabelValues("expired").Inc()
		return false, fmt.Errorf("%w: %w", ErrLockExpired, err)
	default:
		l.f.metrics.Renews.WithLabelValues("failure").Inc()
		return false, err
	}
}

// IsExpired reports whether the lock is lost or must be assumed lost. It
// answers true without a round trip once the holder deadline has passed
// (the send of the last confirmed renewal plus TTL·(1 − 2ρ) − lock delay)
// or the loss is known; otherwise it asks the server whether the lease is
// gone. A released lock counts as expired.
func (l *heldLock) IsExpired(ctx context.Context) (bool, error) {
	if l.released.Load() || l.h.IsExpired() {
		return true, nil
	}
	_, err := l.h.TTL(ctx)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, fenced.ErrOwnershipLost):
		return true, nil
	}
	return false, err
}
