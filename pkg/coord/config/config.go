// Package config is the coord module's configuration centre on
// pkg/config: any JSON-encodable value under a key, read into a typed
// destination, written unconditionally or compare-and-set on the key's
// version, watched as a stream of typed events, and read or written a
// whole key prefix at a time.
package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	store "github.com/metastore-io/metastore/pkg/config"
	"github.com/metastore-io/metastore/pkg/coord/validation"
)

// Errors: a missing key, and a compare-and-set that found another version
// (the same values pkg/config uses).
var (
	ErrNotFound        = store.ErrNotFound
	ErrVersionMismatch = store.ErrVersionMismatch
)

// EventType says what happened to a key.
type EventType string

// Event types.
const (
	EventTypePut    EventType = "PUT"
	EventTypeDelete EventType = "DELETE"
)

// ConfigEvent is one change of a watched key: Value is the new value
// decoded into the watch's type (its zero value for a delete).
type ConfigEvent[T any] struct {
	Type    EventType
	Key     string
	Value   T
	Version int64
	// Err is set when the stored bytes did not decode into the type.
	Err error
}

// Watcher delivers a key's changes until Close.
type Watcher[T any] interface {
	Chan() <-chan ConfigEvent[T]
	Close()
}

// ConfigCenter is the design's interface, with the prefix batch
// operations and Delete.
type ConfigCenter interface {
	Get(ctx context.Context, key string, v interface{}) error
	Set(ctx context.Context, key string, value interface{}) error
	Watch(ctx context.Context, key string, v interface{}) (Watcher[any], error)
	CompareAndSet(ctx context.Context, key string, value interface{}, expectedVersion int64) error

	// GetVersion is Get that also returns the version CompareAndSet compares.
	GetVersion(ctx context.Context, key string, v interface{}) (int64, error)
	Delete(ctx context.Context, key string) error
	// List returns the keys under prefix.
	List(ctx context.Context, prefix string) ([]string, error)
	// GetPrefix decodes every key under prefix into out, a pointer to a
	// map from key to the value type (e.g. *map[string]Limits).
	GetPrefix(ctx context.Context, prefix string, out interface{}) error
	// SetBatch writes every value in one transaction: all or none.
	SetBatch(ctx context.Context, values map[string]interface{}) error
	// DeletePrefix removes every key under prefix.
	DeletePrefix(ctx context.Context, prefix string) (int64, error)
}

// Center implements ConfigCenter on a pkg/config store of raw JSON.
type Center struct {
	store *store.Store[json.RawMessage]
	// retry wraps every one-shot call with the module's retry policy.
	retry func(ctx context.Context, op func(ctx context.Context) error) error
}

// New returns a centre keeping values under prefix on client; retry runs
// each call (nil: once).
func New(client *clientv3.Client, prefix string, retry func(context.Context, func(context.Context) error) error) *Center {
	if retry == nil {
		retry = func(ctx context.Context, op func(context.Context) error) error { return op(ctx) }
	}
	return &Center{store: store.NewStore[json.RawMessage](client, prefix, nil), retry: retry}
}

func encode(key string, value interface{}) (json.RawMessage, error) {
	if key == "" {
		return nil, &validation.Error{Field: "key", Reason: "empty"}
	}
	b, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("config %s: encode: %w", key, err)
	}
	return b, nil
}

// Get decodes the key's value into v (a pointer).
func (c *Center) Get(ctx context.Context, key string, v interface{}) error {
	_, err := c.GetVersion(ctx, key, v)
	return err
}

// GetVersion decodes the key's value into v and returns its version.
func (c *Center) GetVersion(ctx context.Context, key string, v interface{}) (int64, error) {
	var got store.Value[json.RawMessage]
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		got, err = c.store.Get(ctx, key)
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(got.Value, v); err != nil {
		return 0, fmt.Errorf("config %s: decode: %w", key, err)
	}
	return got.Version, nil
}

// Set writes value (JSON-encoded) under key.
func (c *Center) Set(ctx context.Context, key string, value interface{}) error {
	raw, err := encode(key, value)
	if err != nil {
		return err
	}
	return c.retry(ctx, func(ctx context.Context) error {
		_, err := c.store.Set(ctx, key, raw)
		return err
	})
}

// CompareAndSet writes value only if the key's version is expectedVersion
// (0: only if the key does not exist); otherwise ErrVersionMismatch.
func (c *Center) CompareAndSet(ctx context.Context, key string, value interface{}, expectedVersion int64) error {
	raw, err := encode(key, value)
	if err != nil {
		return err
	}
	return c.retry(ctx, func(ctx context.Context) error {
		_, err := c.store.CompareAndSet(ctx, key, expectedVersion, raw)
		return err
	})
}

// Delete removes key.
func (c *Center) Delete(ctx context.Context, key string) error {
	return c.retry(ctx, func(ctx context.Context) error { return c.store.Delete(ctx, key) })
}

func (c *Center) getPrefix(ctx context.Context, prefix string) (map[string]store.Value[json.RawMessage], error) {
	var all map[string]store.Value[json.RawMessage]
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		all, err = c.store.GetPrefix(ctx, prefix)
		return err
	})
	return all, err
}

// List returns the keys under prefix.
func (c *Center) List(ctx context.Context, prefix string) ([]string, error) {
	all, err := c.getPrefix(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	return keys, nil
}

// GetPrefix decodes every key under prefix into out (*map[string]T).
func (c *Center) GetPrefix(ctx context.Context, prefix string, out interface{}) error {
	all, err := c.getPrefix(ctx, prefix)
	if err != nil {
		return err
	}
	raw := make(map[string]json.RawMessage, len(all))
	for k, v := range all {
		raw[k] = v.Value
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return fmt.Errorf("config prefix %s: %w", prefix, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("config prefix %s: decode: %w", prefix, err)
	}
	return nil
}

// SetBatch writes every value in one transaction.
func (c *Center) SetBatch(ctx context.Context, values map[string]interface{}) error {
	raw := make(map[string]json.RawMessage, len(values))
	for k, v := range values {
		b, err := encode(k, v)
		if err != nil {
			return err
		}
		raw[k] = b
	}
	return c.retry(ctx, func(ctx context.Context) error {
		_, err := c.store.SetAll(ctx, raw)
		return err
	})
}

// DeletePrefix removes every key under prefix.
func (c *Center) DeletePrefix(ctx context.Context, prefix string) (int64, error) {
	var n int64
	err := c.retry(ctx, func(ctx context.Context) error {
		var err error
		n, err = c.store.DeletePrefix(ctx, prefix)
		return err
	})
	return n, err
}

// Watch delivers the key's current value (if any) and then every change,
// each decoded into a new value of v's type (v is a pointer or a value
// of the wanted type; events carry the value, not a pointer).
func (c *Center) Watch(ctx context.Context, key string, v interface{}) (Watcher[any], error) {
	if key == "" {
		return nil, &validation.Error{Field: "key", Reason: "empty"}
	}
	typ := reflect.TypeOf(v)
	if typ == nil {
		return nil, errors.New("config: Watch needs a value or pointer of the wanted type")
	}
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel, out: make(chan ConfigEvent[any]), done: make(chan struct{})}
	updates := c.store.Watch(ctx, key)
	go func() {
		defer close(w.done)
		defer close(w.out)
		for u := range updates {
			ev := ConfigEvent[any]{Type: EventTypePut, Key: key, Version: u.Version, Err: u.Err}
			if u.Deleted {
				ev.Type = EventTypeDelete
				ev.Value = reflect.Zero(typ).Interface()
			} else if ev.Err == nil {
				ptr := reflect.New(typ)
				if err := json.Unmarshal(u.Value.Value, ptr.Interface()); err != nil {
					ev.Err = fmt.Errorf("config %s: decode: %w", key, err)
				}
				ev.Value = ptr.Elem().Interface()
			}
			select {
			case w.out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return w, nil
}

type watcher struct {
	cancel context.CancelFunc
	out    chan ConfigEvent[any]
	done   chan struct{}
	once   sync.Once
}

func (w *watcher) Chan() <-chan ConfigEvent[any] { return w.out }

// Close stops the watch; Chan is closed once it has ended.
func (w *watcher) Close() {
	w.once.Do(func() {
		w.cancel()
		go func() {
			for range w.out { // unblock a pending send
			}
		}()
		<-w.done
	})
}

var _ ConfigCenter = (*Center)(nil)
