package config

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/internal/pause"
)

// The errors of this package.
var (
	// ErrNotFound is returned by Get for a name with no value.
	ErrNotFound = errors.New("config: not found")
	// ErrVersionMismatch is returned by CompareAndSet when the stored
	// version is not the expected one.
	ErrVersionMismatch = errors.New("config: version mismatch")
)

// retryPause spaces attempts to re-read or re-watch after a failure.
const retryPause = 200 * time.Millisecond

// Value is a decoded value with its position in the store's history.
type Value[T any] struct {
	Value T
	// Version counts the writes to the key since it was created (1 for a
	// fresh key); CompareAndSet compares it.
	Version int64
	// Revision is the store revision of the write that produced the value.
	Revision int64
}

// Store keeps values of type T under a key prefix.
type Store[T any] struct {
	client *clientv3.Client
	prefix string
	codec  Codec[T]
}

// NewStore returns a store for values of type T under prefix, encoded with
// codec (JSON[T] when nil).
func NewStore[T any](client *clientv3.Client, prefix string, codec Codec[T]) *Store[T] {
	if codec == nil {
		codec = JSON[T]{}
	}
	return &Store[T]{client: client, prefix: prefix, codec: codec}
}

// Key is the store key of the named value.
func (s *Store[T]) Key(name string) string { return s.prefix + name }

func (s *Store[T]) decode(kv *mvccpb.KeyValue) (Value[T], error) {
	v, err := s.codec.Decode(kv.Value)
	if err != nil {
		return Value[T]{Version: kv.Version, Revision: kv.ModRevision}, fmt.Errorf("config %s at revision %d: %w", kv.Key, kv.ModRevision, err)
	}
	return Value[T]{Value: v, Version: kv.Version, Revision: kv.ModRevision}, nil
}

// Get reads the named value; ErrNotFound if it has none.
func (s *Store[T]) Get(ctx context.Context, name string) (Value[T], error) {
	v, _, err := s.get(ctx, name)
	return v, err
}

// get also returns the revision the read was made at.
func (s *Store[T]) get(ctx context.Context, name string) (Value[T], int64, error) {
	resp, err := s.client.Get(ctx, s.Key(name))
	if err != nil {
		return Value[T]{}, 0, fmt.Errorf("config get %s: %w", s.Key(name), err)
	}
	if len(resp.Kvs) == 0 {
		return Value[T]{}, resp.Header.Revision, fmt.Errorf("config %s: %w", s.Key(name), ErrNotFound)
	}
	v, err := s.decode(resp.Kvs[0])
	return v, resp.Header.Revision, err
}

// Set writes v unconditionally and returns it with its new version.
func (s *Store[T]) Set(ctx context.Context, name string, v T) (Value[T], error) {
	return s.write(ctx, name, v, nil)
}

// CompareAndSet writes v only if the stored version equals version (0: only
// if the name has no value yet). On mismatch it returns the stored value
// and an error wrapping ErrVersionMismatch.
func (s *Store[T]) CompareAndSet(ctx context.Context, name string, version int64, v T) (Value[T], error) {
	return s.write(ctx, name, v, []clientv3.Cmp{clientv3.Compare(clientv3.Version(s.Key(name)), "=", version)})
}

// write puts v under the guard cmps and reads the key back in the same
// transaction, so the caller learns the version it produced.
func (s *Store[T]) write(ctx context.Context, name string, v T, cmps []clientv3.Cmp) (Value[T], error) {
	key := s.Key(name)
	encoded, err := s.codec.Encode(v)
	if err != nil {
		return Value[T]{}, fmt.Errorf("config set %s: %w", key, err)
	}
	resp, err := s.client.Txn(ctx).If(cmps...).
		Then(clientv3.OpPut(key, string(encoded)), clientv3.OpGet(key)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return Value[T]{}, fmt.Errorf("config set %s: %w", key, err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return Value[T]{}, fmt.Errorf("config set %s: no value stored: %w", key, ErrVersionMismatch)
		}
		current, err := s.decode(kvs[0])
		return current, errors.Join(fmt.Errorf("config set %s: stored version is %d: %w", key, kvs[0].Version, ErrVersionMismatch), err)
	}
	kv := resp.Responses[1].GetResponseRange().Kvs[0]
	return Value[T]{Value: v, Version: kv.Version, Revision: kv.ModRevision}, nil
}

// Delete removes the named value.
func (s *Store[T]) Delete(ctx context.Context, name string) error {
	if _, err := s.client.Delete(ctx, s.Key(name)); err != nil {
		return fmt.Errorf("config delete %s: %w", s.Key(name), err)
	}
	return nil
}

// Update is one change delivered by Watch.
type Update[T any] struct {
	Value[T]
	// Deleted: the value was deleted at Revision; Value is T's zero value.
	Deleted bool
	// Resynced: writes between the previous update and this one were
	// compacted away before the watch could deliver them; this is the
	// value current at Revision.
	Resynced bool
	// Err is set when the stored bytes did not decode; Version and
	// Revision still say which write it was.
	Err error
}

// Watch delivers the named value's current state (unless it has none) and
// then every write and delete, in order, until ctx ends; the channel then
// closes. Failures to reach the store are retried, and the watch resumes
// after the last revision it delivered.
func (s *Store[T]) Watch(ctx context.Context, name string) <-chan Update[T] {
	out := make(chan Update[T])
	go func() {
		defer close(out)
		for {
			v, rev, err := s.get(ctx, name)
			if ctx.Err() != nil {
				return
			}
			if err != nil && rev == 0 {
				// Not read at all (store unreachable): try again, unless
				// the client is closed for good.
				if s.client.Ctx().Err() != nil || !pause.For(ctx, retryPause) {
					return
				}
				continue
			}
			exists := !errors.Is(err, ErrNotFound)
			if exists && !send(ctx, out, Update[T]{Value: v, Err: err}) {
				return
			}
			s.follow(ctx, name, rev, exists, out)
			return
		}
	}()
	return out
}

// follow delivers every change to the named value after revision rev until
// ctx ends; exists says whether the value existed at rev.
func (s *Store[T]) follow(ctx context.Context, name string, rev int64, exists bool, out chan<- Update[T]) {
	key := s.Key(name)
	delivered := rev // every change up to here has been delivered
	// A closed client never recovers; stop rather than retry forever.
	for ctx.Err() == nil && s.client.Ctx().Err() == nil {
		watchCtx, cancel := context.WithCancel(ctx)
		compacted := false
		for wr := range s.client.Watch(watchCtx, key, clientv3.WithRev(delivered+1)) {
			if err := wr.Err(); err != nil {
				compacted = errors.Is(err, rpctypes.ErrCompacted) || wr.CompactRevision != 0
				break
			}
			for _, ev := range wr.Events {
				u := Update[T]{Value: Value[T]{Revision: ev.Kv.ModRevision}}
				if ev.Type == clientv3.EventTypeDelete {
					u.Deleted = true
				} else {
					u.Value, u.Err = s.decode(ev.Kv)
				}
				if !send(ctx, out, u) {
					cancel()
					return
				}
				delivered, exists = ev.Kv.ModRevision, !u.Deleted
			}
		}
		cancel()
		if !pause.For(ctx, retryPause) {
			return
		}
		if compacted {
			var ok bool
			delivered, exists, ok = s.resync(ctx, name, delivered, exists, out)
			if !ok {
				return
			}
		}
	}
}

// resync reads the value after the history it needed was compacted and
// delivers it if it changed since revision delivered (existing or not, as
// exists says). It returns the revision to watch after, whether the value
// exists there, and false if ctx ended.
func (s *Store[T]) resync(ctx context.Context, name string, delivered int64, exists bool, out chan<- Update[T]) (int64, bool, bool) {
	for {
		v, rev, err := s.get(ctx, name)
		if ctx.Err() != nil {
			return 0, false, false
		}
		if err != nil && rev == 0 {
			if s.client.Ctx().Err() != nil || !pause.For(ctx, retryPause) {
				return 0, false, false
			}
			continue
		}
		found := !errors.Is(err, ErrNotFound)
		var u Update[T]
		switch {
		case !found && exists:
			// Deleted at some compacted revision: report it at the read.
			u = Update[T]{Value: Value[T]{Revision: rev}, Deleted: true, Resynced: true}
		case found && v.Revision > delivered:
			u = Update[T]{Value: v, Resynced: true, Err: err}
		default:
			return rev, found, true // nothing changed that was not delivered
		}
		if !send(ctx, out, u) {
			return 0, false, false
		}
		return rev, found, true
	}
}

func send[T any](ctx context.Context, out chan<- Update[T], u Update[T]) bool {
	select {
	case out <- u:
		return true
	case <-ctx.Done():
		return false
	}
}
