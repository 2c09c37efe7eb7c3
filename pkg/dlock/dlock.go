package dlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency/lock"
)

// The errors of the design, and ErrClosed for a closed Locker.
var (
	ErrConfigNil       = errors.New("dlock: config is nil")
	ErrConnectorNil    = errors.New("dlock: connector is nil")
	ErrLockNotHeld     = errors.New("dlock: lock not held")
	ErrLockAlreadyHeld = errors.New("dlock: lock already held locally")
	ErrOwnershipLost   = errors.New("dlock: ownership lost")
	ErrClosed          = errors.New("dlock: locker closed")
)

// DriverType selects the backend.
type DriverType string

// Drivers. DriverEtcd and DriverMetaStore are the same driver (MetaStore
// speaks etcd's API); DriverRedis is the design's and not provided.
const (
	DriverEtcd      DriverType = "etcd"
	DriverMetaStore DriverType = "metastore"
	DriverRedis     DriverType = "redis"
)

// Defaults of Config.
const (
	DefaultTTL           = 10 * time.Second
	DefaultRetryInterval = 100 * time.Millisecond
	// closeTimeout bounds the releases Close performs.
	closeTimeout = 5 * time.Second
)

// Config is the component's static configuration.
type Config struct {
	// Driver is DriverEtcd (the default when empty) or DriverMetaStore.
	Driver DriverType `json:"driver" yaml:"driver"`
	// Prefix is prepended to every key, e.g. "myapp:lock:".
	Prefix string `json:"prefix" yaml:"prefix"`
	// DefaultTTL is a lock's TTL unless WithTTL says otherwise (10 s).
	DefaultTTL time.Duration `json:"default_ttl" yaml:"default_ttl"`
	// RetryInterval spaces Lock's retries after transient errors (100 ms).
	RetryInterval time.Duration `json:"retry_interval" yaml:"retry_interval"`
	// LockDelay is the lock delay D: a held lock counts as lost D before
	// the last moment its confirmed renewals keep it alive. 0 means one
	// second, capped at a quarter of the TTL; at most half the TTL.
	LockDelay time.Duration `json:"lock_delay" yaml:"lock_delay"`
}

// Locker is the component's lock interface.
type Locker interface {
	// Lock blocks until the lock on key is held or ctx ends.
	Lock(ctx context.Context, key string, opts ...LockOption) error
	// TryLock takes the lock if it is free: (true, nil); (false, nil) if
	// another owner holds it.
	TryLock(ctx context.Context, key string, opts ...LockOption) (bool, error)
	// Unlock releases a lock this Locker holds.
	Unlock(ctx context.Context, key string) error
	// Close stops renewals and releases every lock still held.
	Close() error
}

// Connector hands out the client the driver uses (the design's injected
// connector); ClientConnector wraps a plain client.
type Connector interface {
	GetClient() *clientv3.Client
}

// ClientConnector is a Connector of an existing client.
func ClientConnector(c *clientv3.Client) Connector { return clientConnector{c} }

type clientConnector struct{ c *clientv3.Client }

func (c clientConnector) GetClient() *clientv3.Client { return c.c }

// Option configures New.
type Option func(*options)

type options struct {
	logger    *slog.Logger
	connector Connector
}

// WithLogger sets the logger; every record carries component=dlock.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithEtcdConnector injects the connection to MetaStore (or etcd).
func WithEtcdConnector(c Connector) Option { return func(o *options) { o.connector = c } }

// LockOption configures one Lock or TryLock call.
type LockOption func(*lockOptions)

type lockOptions struct{ ttl time.Duration }

// WithTTL sets this lock's TTL (rounded up to whole seconds).
func WithTTL(ttl time.Duration) LockOption { return func(o *lockOptions) { o.ttl = ttl } }

// New returns a Locker for cfg on the injected connector.
func New(cfg *Config, opts ...Option) (Locker, error) {
	if cfg == nil {
		return nil, ErrConfigNil
	}
	c := *cfg
	switch c.Driver {
	case "", DriverEtcd, DriverMetaStore:
	case DriverRedis:
		return nil, errors.New("dlock: the redis driver is not provided by MetaStore; use etcd")
	default:
		return nil, fmt.Errorf("dlock: unsupported driver %q", c.Driver)
	}
	if c.DefaultTTL < 0 || c.RetryInterval < 0 || c.LockDelay < 0 {
		return nil, fmt.Errorf("dlock: negative DefaultTTL %v, RetryInterval %v or LockDelay %v", c.DefaultTTL, c.RetryInterval, c.LockDelay)
	}
	if c.DefaultTTL == 0 {
		c.DefaultTTL = DefaultTTL
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	var o options
	for _, apply := range opts {
		apply(&o)
	}
	if o.connector == nil || o.connector.GetClient() == nil {
		return nil, ErrConnectorNil
	}
	log := o.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "dlock")
	locks, err := lock.NewLocker(lock.Config{
		Client: o.connector.GetClient(), Prefix: c.Prefix, TTL: c.DefaultTTL,
		RetryInterval: c.RetryInterval, LockDelay: c.LockDelay, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("dlock: %w", err)
	}
	return &locker{cfg: c, client: o.connector.GetClient(), locks: locks, log: log, held: map[string]*heldLock{}}, nil
}

// locker implements Locker on one lock.Locker.
type locker struct {
	cfg    Config
	client *clientv3.Client
	locks  *lock.Locker
	log    *slog.Logger

	mu     sync.Mutex // guards held and closed
	held   map[string]*heldLock
	closed bool
}

// heldLock is one held key and its watchdog.
type heldLock struct {
	h       *lock.Lock
	stop    chan struct{} // closed by Unlock or Close
	watched chan struct{} // closed when the watchdog goroutine ends
}

func (l *locker) Lock(ctx context.Context, key string, opts ...LockOption) error {
	return l.acquire(ctx, key, true, opts)
}

func (l *locker) TryLock(ctx context.Context, key string, opts ...LockOption) (bool, error) {
	err := l.acquire(ctx, key, false, opts)
	if errors.Is(err, lock.ErrLocked) {
		return false, nil
	}
	return err == nil, err
}

func (l *locker) acquire(ctx context.Context, key string, wait bool, opts []LockOption) error {
	if key == "" || strings.Contains(key, "\x00") {
		return fmt.Errorf("dlock: invalid key %q", key)
	}
	o := lockOptions{ttl: l.cfg.DefaultTTL}
	for _, apply := range opts {
		apply(&o)
	}
	if o.ttl <= 0 {
		return fmt.Errorf("dlock: TTL %v must be positive", o.ttl)
	}
	l.mu.Lock()
	closed, busy := l.closed, l.held[key] != nil
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if busy {
		return fmt.Errorf("dlock: %q: %w", key, ErrLockAlreadyHeld)
	}
	lockOpts := []lock.Option{lock.WithTTL(o.ttl), lock.WithRetryInterval(l.cfg.RetryInterval)}
	var h *lock.Lock
	var err error
	if wait {
		h, err = l.locks.Lock(ctx, key, lockOpts...)
	} else {
		h, err = l.locks.TryLock(ctx, key, lockOpts...)
	}
	switch {
	case errors.Is(err, lock.ErrLockAlreadyHeld):
		return fmt.Errorf("dlock: %q: %w", key, ErrLockAlreadyHeld)
	case err != nil:
		return fmt.Errorf("dlock: %w", err)
	}
	hl := &heldLock{h: h, stop: make(chan struct{}), watched: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = h.Unlock(context.WithoutCancel(ctx))
		return ErrClosed
	}
	l.held[key] = hl
	l.mu.Unlock()
	go l.watchdog(key, hl)
	l.log.Info("lock acquired", "key", l.cfg.Prefix+key, "ttl", o.ttl, "token", h.FencingToken())
	return nil
}

// watchdog reports a lock lost while held (HoldContext is the holder's
// own signal, which does not wait for these records). Renewal itself is
// the lock's background keep-alive; a loss at the holder deadline means
// no renewal was confirmed in time, and is logged as a failed renewal
// too, without asking the server.
func (l *locker) watchdog(key string, hl *heldLock) {
	defer close(hl.watched)
	select {
	case <-hl.stop:
		return
	case <-hl.h.Lost():
	}
	err := hl.h.Err()
	// Past the deadline renewal has failed by definition; otherwise (the
	// key was deleted) ask whether the lease is gone too.
	if !time.Now().Before(hl.h.Deadline()) || !l.leaseAlive(hl.h.Lease()) {
		l.log.Warn("watchdog renew failed", "key", l.cfg.Prefix+key, "lease", int64(hl.h.Lease()), "error", err)
	}
	l.log.Warn("ownership lost", "key", l.cfg.Prefix+key, "token", hl.h.FencingToken(), "error", err)
}

// leaseAlive asks the server whether the lease still exists; an
// unreachable server counts as not alive (renewal cannot succeed).
func (l *locker) leaseAlive(id clientv3.LeaseID) bool {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	resp, err := l.client.TimeToLive(ctx, id)
	return err == nil && resp.TTL > 0
}

// HoldContext returns the context of this Locker's hold on key: it is
// cancelled when the lock is lost (its cause wraps ErrOwnershipLost) or
// released. Run the critical section under it. It fails with
// ErrLockNotHeld when l does not hold key, and for a Locker New did not
// make.
func HoldContext(l Locker, key string) (context.Context, error) {
	ll, ok := l.(*locker)
	if !ok {
		return nil, fmt.Errorf("dlock: %q: %w (not a Locker from New)", key, ErrLockNotHeld)
	}
	ll.mu.Lock()
	hl := ll.held[key]
	ll.mu.Unlock()
	if hl == nil {
		return nil, fmt.Errorf("dlock: %q: %w", key, ErrLockNotHeld)
	}
	return hl.h.ContextAs(ErrOwnershipLost, fmt.Errorf("dlock: %q: %w", key, ErrLockNotHeld)), nil
}

func (l *locker) Unlock(ctx context.Context, key string) error {
	l.mu.Lock()
	hl := l.held[key]
	l.mu.Unlock()
	if hl == nil {
		return fmt.Errorf("dlock: %q: %w", key, ErrLockNotHeld)
	}
	err := hl.h.Unlock(ctx)
	if err != nil && !errors.Is(err, lock.ErrOwnershipLost) && !errors.Is(err, lock.ErrLockNotHeld) {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// No answer within the request timeout: the handle gave the
			// lock up (its key goes when the lease expires).
			l.forget(key, hl)
		}
		// Otherwise the lock is still held; Unlock may be retried.
		return fmt.Errorf("dlock: unlock %q: %w", key, err)
	}
	l.forget(key, hl)
	switch {
	case errors.Is(err, lock.ErrOwnershipLost):
		l.log.Warn("ownership lost", "key", l.cfg.Prefix+key, "token", hl.h.FencingToken(), "error", err)
		return fmt.Errorf("dlock: unlock %q: %w: %w", key, ErrOwnershipLost, err)
	case err != nil:
		return fmt.Errorf("dlock: unlock %q: %w", key, ErrLockNotHeld)
	}
	l.log.Info("lock released", "key", l.cfg.Prefix+key, "token", hl.h.FencingToken())
	return nil
}

// forget drops key's record and stops its watchdog.
func (l *locker) forget(key string, hl *heldLock) {
	l.mu.Lock()
	if l.held[key] == hl {
		delete(l.held, key)
	}
	l.mu.Unlock()
	close(hl.stop)
	<-hl.watched
}

func (l *locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	keys := make([]string, 0, len(l.held))
	for k := range l.held {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	for _, k := range keys {
		if err := l.Unlock(ctx, k); err != nil && !errors.Is(err, ErrOwnershipLost) && !errors.Is(err, ErrLockNotHeld) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
