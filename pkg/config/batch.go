package config

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// GetPrefix reads every value whose name starts with namePrefix, at one
// revision, keyed by name. Values that do not decode are reported in the
// error (joined) and left out of the map.
func (s *Store[T]) GetPrefix(ctx context.Context, namePrefix string) (map[string]Value[T], error) {
	resp, err := s.client.Get(ctx, s.Key(namePrefix), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("config get prefix %s: %w", s.Key(namePrefix), err)
	}
	out := make(map[string]Value[T], len(resp.Kvs))
	var errs []error
	for _, kv := range resp.Kvs {
		v, err := s.decode(kv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[strings.TrimPrefix(string(kv.Key), s.prefix)] = v
	}
	return out, errors.Join(errs...)
}

// SetAll writes every value in one transaction, all or none, and returns
// the revision of the write. The server bounds the number of operations
// in one transaction (128 by default, --max-txn-ops).
func (s *Store[T]) SetAll(ctx context.Context, values map[string]T) (int64, error) {
	ops := make([]clientv3.Op, 0, len(values))
	for name, v := range values {
		encoded, err := s.codec.Encode(v)
		if err != nil {
			return 0, fmt.Errorf("config set %s: %w", s.Key(name), err)
		}
		ops = append(ops, clientv3.OpPut(s.Key(name), string(encoded)))
	}
	resp, err := s.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("config set %d values under %s: %w", len(values), s.prefix, err)
	}
	return resp.Header.Revision, nil
}

// DeletePrefix removes every value whose name starts with namePrefix and
// returns how many there were.
func (s *Store[T]) DeletePrefix(ctx context.Context, namePrefix string) (int64, error) {
	resp, err := s.client.Delete(ctx, s.Key(namePrefix), clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("config delete prefix %s: %w", s.Key(namePrefix), err)
	}
	return resp.Deleted, nil
}
