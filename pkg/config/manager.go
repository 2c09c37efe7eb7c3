package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// ManagerConfig configures a Manager.
type ManagerConfig[T any] struct {
	// Store holds the value. Required.
	Store *Store[T]
	// Name is the entry the Manager follows. Required.
	Name string
	// Validate accepts or rejects a new value; nil accepts everything.
	Validate func(T) error
	// Fallback, if set, is the current value until a valid one is read:
	// when the entry is missing, invalid or unreachable at start.
	// Without it NewManager fails in those cases.
	Fallback *T
	// OnChange, if set, is called after each accepted change, in order,
	// from the Manager's goroutine. It must not block for long.
	OnChange func(previous, current Value[T])
	// Logger receives rejected values; nil discards them.
	Logger *slog.Logger
}

// Manager holds the current valid value of one entry and follows its
// changes in the background.
type Manager[T any] struct {
	cfg ManagerConfig[T]
	log *slog.Logger

	current atomic.Pointer[Value[T]]

	errMu   sync.Mutex
	lastErr error

	stop context.CancelFunc
	done chan struct{}
}

// NewManager reads the entry (bounded by ctx), validates it and starts
// following it. See ManagerConfig.Fallback for when it fails.
func NewManager[T any](ctx context.Context, cfg ManagerConfig[T]) (*Manager[T], error) {
	if cfg.Store == nil || cfg.Name == "" {
		return nil, errors.New("config: ManagerConfig needs a Store and a Name")
	}
	if cfg.Validate == nil {
		cfg.Validate = func(T) error { return nil }
	}
	m := &Manager[T]{cfg: cfg, log: cfg.Logger, done: make(chan struct{})}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}

	v, rev, err := cfg.Store.get(ctx, cfg.Name)
	if err == nil {
		if verr := cfg.Validate(v.Value); verr != nil {
			err = fmt.Errorf("config %s version %d rejected: %w", cfg.Store.Key(cfg.Name), v.Version, verr)
		} else {
			m.current.Store(&v)
		}
	}
	if err != nil {
		if cfg.Fallback == nil {
			return nil, fmt.Errorf("config manager %s: no valid value and no fallback: %w", cfg.Store.Key(cfg.Name), err)
		}
		m.current.Store(&Value[T]{Value: *cfg.Fallback})
		m.setErr(err)
	}

	runCtx, stop := context.WithCancel(context.Background())
	m.stop = stop
	var updates <-chan Update[T]
	if rev == 0 {
		// Never reached the store: Watch reads it first, then follows.
		updates = cfg.Store.Watch(runCtx, cfg.Name)
	} else {
		ch := make(chan Update[T])
		exists := !errors.Is(err, ErrNotFound)
		go func() {
			defer close(ch)
			cfg.Store.follow(runCtx, cfg.Name, rev, exists, ch)
		}()
		updates = ch
	}
	go m.run(updates)
	return m, nil
}

func (m *Manager[T]) run(updates <-chan Update[T]) {
	defer close(m.done)
	for u := range updates {
		m.apply(u)
	}
}

// apply takes u as the new current value if it is newer, decoded and
// valid; otherwise it records why not and keeps the last good value.
func (m *Manager[T]) apply(u Update[T]) {
	key := m.cfg.Store.Key(m.cfg.Name)
	prev := *m.current.Load()
	if u.Revision <= prev.Revision {
		return // already current (the first read is delivered again)
	}
	var reject error
	switch {
	case u.Err != nil:
		reject = u.Err
	case u.Deleted:
		reject = fmt.Errorf("config %s deleted at revision %d", key, u.Revision)
	default:
		if err := m.cfg.Validate(u.Value.Value); err != nil {
			reject = fmt.Errorf("config %s version %d rejected: %w", key, u.Version, err)
		}
	}
	if reject != nil {
		m.setErr(reject)
		m.log.Warn("keeping the last good config value", "key", key, "kept-version", prev.Version, "reason", reject)
		return
	}
	next := u.Value
	m.current.Store(&next)
	m.setErr(nil)
	if m.cfg.OnChange != nil {
		m.cfg.OnChange(prev, next)
	}
}

func (m *Manager[T]) setErr(err error) {
	m.errMu.Lock()
	m.lastErr = err
	m.errMu.Unlock()
}

// Current is the current valid value (or the fallback).
func (m *Manager[T]) Current() T { return m.current.Load().Value }

// Snapshot is the current value with its version and revision (both 0 for
// the fallback).
func (m *Manager[T]) Snapshot() Value[T] { return *m.current.Load() }

// LastError says why the latest value was not taken (it did not decode,
// failed validation, was deleted, or could not be read at start), or nil
// when the latest value is current.
func (m *Manager[T]) LastError() error {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	return m.lastErr
}

// Close stops following the entry. Current keeps returning the last value.
func (m *Manager[T]) Close() {
	m.stop()
	<-m.done
}
