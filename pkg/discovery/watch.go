package discovery

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/internal/pause"
)

// resyncPause spaces attempts to list a service again after its watch or
// a list failed.
const resyncPause = 200 * time.Millisecond

// EventType says what happened to an instance.
type EventType int

const (
	// Added: the instance registered, or its record changed.
	Added EventType = iota + 1
	// Removed: the instance unregistered or its lease expired.
	Removed
)

func (t EventType) String() string {
	switch t {
	case Added:
		return "added"
	case Removed:
		return "removed"
	default:
		return fmt.Sprintf("EventType(%d)", int(t))
	}
}

// Event is a change to a service's instances. For Removed, Endpoint is the
// instance's last known record.
type Event struct {
	Type     EventType
	Key      string
	Endpoint Endpoint
}

// Watch reports the instances of service: every current one as Added,
// then every change in order, until ctx ends (the channel then closes).
// Only the initial list can fail here; later failures are retried.
func (r *Registry) Watch(ctx context.Context, service string) (<-chan Event, error) {
	if err := validateService(service); err != nil {
		return nil, err
	}
	known, rev, err := r.list(ctx, service)
	if err != nil {
		return nil, err
	}
	out := make(chan Event)
	go func() {
		defer close(out)
		emit := func(events []Event, _ map[string]Endpoint) bool {
			for _, ev := range events {
				select {
				case out <- ev:
				case <-ctx.Done():
					return false
				}
			}
			return true
		}
		if !emit(diff(nil, known), known) {
			return
		}
		r.follow(ctx, service, known, rev, emit, nil)
	}()
	return out, nil
}

// applyFunc receives each batch of changes in order together with the full
// set of instances after them; returning false stops following.
type applyFunc func(events []Event, all map[string]Endpoint) bool

// follow keeps known (as read at revision rev) in step with the registry
// until ctx ends or apply says stop. When the watch fails it lists the
// service again and applies the difference; failures to list are passed
// to report (if set) and retried.
func (r *Registry) follow(ctx context.Context, service string, known map[string]Endpoint, rev int64, apply applyFunc, report func(error)) {
	for {
		if !r.watchFrom(ctx, service, known, rev, apply) {
			return
		}
		for {
			if !pause.For(ctx, resyncPause) {
				return
			}
			if r.client.Ctx().Err() != nil {
				return // the client was closed: nothing will ever work again
			}
			fresh, freshRev, err := r.list(ctx, service)
			if err != nil {
				if report != nil && ctx.Err() == nil {
					report(err)
				}
				continue
			}
			events := diff(known, fresh)
			known, rev = fresh, freshRev
			if len(events) > 0 && !apply(events, known) {
				return
			}
			break
		}
	}
}

// watchFrom applies watch events after revision rev to known until the
// watch ends. It returns false when ctx ended or apply said stop, and true
// when the caller should list again and resume (the list, not the last
// revision seen, is the safe restart point after a compaction).
func (r *Registry) watchFrom(ctx context.Context, service string, known map[string]Endpoint, rev int64, apply applyFunc) bool {
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := r.client.Watch(watchCtx, servicePrefix(service), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for wr := range watch {
		if err := wr.Err(); err != nil {
			r.log.Warn("instance watch failed, listing again", "service", service, "error", err)
			return ctx.Err() == nil
		}
		var events []Event
		for _, ev := range wr.Events {
			key := string(ev.Kv.Key)
			prev, had := known[key]
			if ev.Type == clientv3.EventTypeDelete {
				if had {
					delete(known, key)
					events = append(events, Event{Type: Removed, Key: key, Endpoint: prev})
				}
				continue
			}
			ep, err := decodeEndpoint(ev.Kv.Value)
			if err != nil {
				r.log.Warn("skipping undecodable instance record", "key", key, "error", err)
				if had {
					// The record no longer describes an instance.
					delete(known, key)
					events = append(events, Event{Type: Removed, Key: key, Endpoint: prev})
				}
				continue
			}
			known[key] = ep
			events = append(events, Event{Type: Added, Key: key, Endpoint: ep})
		}
		if len(events) > 0 && !apply(events, known) {
			return false
		}
	}
	return ctx.Err() == nil
}

// diff lists the events that turn instance set from into to, removals
// first, each group ordered by key.
func diff(from, to map[string]Endpoint) []Event {
	var removed, added []Event
	for k, ep := range from {
		if _, ok := to[k]; !ok {
			removed = append(removed, Event{Type: Removed, Key: k, Endpoint: ep})
		}
	}
	for k, ep := range to {
		if old, ok := from[k]; !ok || !reflect.DeepEqual(old, ep) {
			added = append(added, Event{Type: Added, Key: k, Endpoint: ep})
		}
	}
	byKey := func(evs []Event) {
		sort.Slice(evs, func(i, j int) bool { return evs[i].Key < evs[j].Key })
	}
	byKey(removed)
	byKey(added)
	return append(removed, added...)
}
