package e2e

import (
	"context"
	"sort"
	"strings"
	"syscall"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// historyModel is the history of one key prefix as the test's acknowledged
// writes made it: the live key-values and every event a watch on the
// prefix must report, prev_kv included, in revision order. Expectations
// are derived from it rather than written out, so a test can ask for "the
// events after revision r" whatever r turned out to be.
type historyModel struct {
	prefix string
	live   map[string]*mvccpb.KeyValue
	events []*mvccpb.Event
}

func newHistoryModel(prefix string) *historyModel {
	return &historyModel{prefix: prefix, live: map[string]*mvccpb.KeyValue{}}
}

// put records a put of key at rev: a new key starts at version 1 with its
// create revision at rev, an existing one keeps its create revision.
func (h *historyModel) put(key, value string, rev int64) {
	kv := &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), CreateRevision: rev, ModRevision: rev, Version: 1}
	prev := h.live[key]
	if prev != nil {
		kv.CreateRevision = prev.CreateRevision
		kv.Version = prev.Version + 1
	}
	h.live[key] = kv
	h.events = append(h.events, &mvccpb.Event{Type: mvccpb.PUT, Kv: kv, PrevKv: prev})
}

// deleteRange records the deletion at rev of every live key in
// [key, key+"\xff"...) when prefix is set, or of key alone, and returns how
// many keys it deleted. A delete event carries only the key and the
// deleting revision, as etcd's do.
func (h *historyModel) deleteRange(key string, prefix bool, rev int64) int {
	var keys []string
	for k := range h.live {
		if k == key || (prefix && strings.HasPrefix(k, key)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.events = append(h.events, &mvccpb.Event{
			Type:   mvccpb.DELETE,
			Kv:     &mvccpb.KeyValue{Key: []byte(k), ModRevision: rev},
			PrevKv: h.live[k],
		})
		delete(h.live, k)
	}
	return len(keys)
}

// since returns the events at revision rev and later; withPrevKV false
// strips prev_kv, as a watch without prev_kv reports them.
func (h *historyModel) since(rev int64, withPrevKV bool) []*mvccpb.Event {
	var evs []*mvccpb.Event
	for _, ev := range h.events {
		if ev.Kv.ModRevision < rev {
			continue
		}
		if !withPrevKV {
			ev = &mvccpb.Event{Type: ev.Type, Kv: ev.Kv}
		}
		evs = append(evs, ev)
	}
	return evs
}

// writeOp is one write of a transaction: a put, a delete of one key, or
// a delete of every key under a prefix.
type writeOp struct {
	key, value string
	del        bool
	prefix     bool
}

func putW(key, value string) writeOp   { return writeOp{key: key, value: value} }
func delW(key string) writeOp          { return writeOp{key: key, del: true} }
func delPrefixW(prefix string) writeOp { return writeOp{key: prefix, del: true, prefix: true} }

func (o writeOp) clientOp() clientv3.Op {
	switch {
	case o.del && o.prefix:
		return clientv3.OpDelete(o.key, clientv3.WithPrefix())
	case o.del:
		return clientv3.OpDelete(o.key)
	default:
		return clientv3.OpPut(o.key, o.value)
	}
}

// modelWriter writes through clientv3 and records every acknowledged write
// under the model's prefix in the model, at the revision the server
// acknowledged. Writes outside the prefix only move the revision.
type modelWriter struct {
	ctx   context.Context
	t     *testing.T
	cli   *clientv3.Client
	model *historyModel
}

func (w *modelWriter) inModel(key string) bool { return strings.HasPrefix(key, w.model.prefix) }

func (w *modelWriter) put(key, value string) {
	w.t.Helper()
	rev := mustPut(w.ctx, w.t, w.cli, key, value).Header.Revision
	if w.inModel(key) {
		w.model.put(key, value, rev)
	}
}

func (w *modelWriter) del(key string) {
	w.t.Helper()
	resp, err := w.cli.Delete(w.ctx, key)
	if err != nil {
		w.t.Fatalf("delete %q: %v", key, err)
	}
	if deleted := w.model.deleteRange(key, false, resp.Header.Revision); int64(deleted) != resp.Deleted {
		w.t.Fatalf("delete %q deleted %d keys, the model %d", key, resp.Deleted, deleted)
	}
}

// txn commits ops in one transaction; the model applies them in order at
// the transaction's single revision, which is the order etcd reports the
// events in.
func (w *modelWriter) txn(ops ...writeOp) {
	w.t.Helper()
	clientOps := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		clientOps[i] = op.clientOp()
	}
	resp, err := w.cli.Txn(w.ctx).Then(clientOps...).Commit()
	if err != nil {
		w.t.Fatalf("txn: %v", err)
	}
	rev := resp.Header.Revision
	for i, op := range ops {
		switch {
		case !w.inModel(op.key):
		case op.del:
			deleted := w.model.deleteRange(op.key, op.prefix, rev)
			if got := resp.Responses[i].GetResponseDeleteRange().Deleted; got != int64(deleted) {
				w.t.Fatalf("txn op %d deleted %d keys under %q, the model %d", i, got, op.key, deleted)
			}
		default:
			w.model.put(op.key, op.value, rev)
		}
	}
}

// collectEvents reads wch until it has at least n events; more than n in
// the last response shows up as a mismatch in requireModelEvents.
func collectEvents(ctx context.Context, t *testing.T, wch clientv3.WatchChan, n int) []*mvccpb.Event {
	t.Helper()
	var evs []*mvccpb.Event
	for len(evs) < n {
		select {
		case resp, ok := <-wch:
			if !ok {
				t.Fatalf("watch channel closed after %d of %d events: %s", len(evs), n, describeEvents(evs))
			}
			if err := resp.Err(); err != nil {
				t.Fatalf("watch failed after %d of %d events: %v", len(evs), n, err)
			}
			for _, ev := range resp.Events {
				evs = append(evs, (*mvccpb.Event)(ev))
			}
		case <-ctx.Done():
			t.Fatalf("got %d of %d events before %v: %s", len(evs), n, ctx.Err(), describeEvents(evs))
		}
	}
	return evs
}

// requireModelEvents checks got against want event by event, every field
// of kv and prev_kv included.
func requireModelEvents(t *testing.T, got, want []*mvccpb.Event) {
	t.Helper()
	if len(got) != len(want) || describeEvents(got) != describeEvents(want) {
		t.Fatalf("got %d events\n  %s\nwant %d\n  %s", len(got), describeEvents(got), len(want), describeEvents(want))
	}
	for i := range want {
		if got[i].Type != want[i].Type {
			t.Fatalf("event %d: type %s, want %s", i, got[i].Type, want[i].Type)
		}
		requireKV(t, got[i].Kv, *want[i].Kv)
		switch {
		case want[i].PrevKv == nil && got[i].PrevKv != nil:
			t.Fatalf("event %d: unexpected prev_kv %v", i, got[i].PrevKv)
		case want[i].PrevKv != nil:
			requireKV(t, got[i].PrevKv, *want[i].PrevKv)
		}
	}
}

// requireNothingPending asks the server for a progress notification on
// the stream of wchs (the client's default stream, opened with a context
// that carries no metadata) and checks it is the next response of every
// channel, at revision rev: the server sends a watch's events before any
// progress notification that covers them, so anything still pending, a
// duplicate for example, would arrive first.
func requireNothingPending(ctx context.Context, t *testing.T, cli *clientv3.Client, rev int64, wchs ...clientv3.WatchChan) {
	t.Helper()
	if err := cli.RequestProgress(ctx); err != nil {
		t.Fatalf("request progress: %v", err)
	}
	for i, wch := range wchs {
		select {
		case resp := <-wch:
			if !resp.IsProgressNotify() || resp.Header.Revision != rev {
				t.Fatalf("watch %d: got %d events (%s), canceled=%v, header revision %d; want only a progress notification at %d",
					i, len(resp.Events), describeEvents(eventsOf(resp)), resp.Canceled, resp.Header.Revision, rev)
			}
		case <-ctx.Done():
			t.Fatalf("watch %d: no progress notification: %v", i, ctx.Err())
		}
	}
}

func eventsOf(resp clientv3.WatchResponse) []*mvccpb.Event {
	evs := make([]*mvccpb.Event, len(resp.Events))
	for i, ev := range resp.Events {
		evs[i] = (*mvccpb.Event)(ev)
	}
	return evs
}

// TestWatchResumesAfterRestart is the contract a client relies on to
// never miss an event across a server restart: it remembers the revision
// of the last event it saw and, once the server is back, watches again
// from the next one.
func TestWatchResumesAfterRestart(t *testing.T) {
	t.Parallel()
	t.Run("sigterm", func(t *testing.T) {
		t.Parallel()
		testWatchResume(t, func(t *testing.T, s *server) {
			status, err := s.member().Stop(stopTimeout)
			if err != nil {
				t.Fatalf("SIGTERM: %v", err)
			}
			if target := s.cluster.Target(); !target.IsCleanStop(status) {
				t.Fatalf("SIGTERM: %s ended with %s, not a clean shutdown", target, status)
			}
		})
	})
	t.Run("kill9", func(t *testing.T) {
		t.Parallel()
		// The last write was acknowledged an instant before the kill, so
		// whatever the server had not yet moved out of its log must come
		// back from it.
		testWatchResume(t, func(t *testing.T, s *server) {
			status, err := s.member().Kill()
			if err != nil {
				t.Fatalf("kill -9: %v", err)
			}
			if status.Signal != syscall.SIGKILL {
				t.Fatalf("kill -9: process ended with %s", status)
			}
		})
	})
}

func testWatchResume(t *testing.T, stop func(*testing.T, *server)) {
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, durabilityTimeout)
	model := newHistoryModel("/r/")
	w := &modelWriter{ctx: ctx, t: t, cli: s.cli, model: model}
	w.put("/other", "o") // outside the watched prefix throughout

	// Phase 1, watched live: puts, an overwrite, deletes and a multi-op
	// transaction.
	watchCtx, stopWatch := context.WithCancel(ctx)
	live := s.cli.Watch(watchCtx, "/r/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
	if resp := <-live; !resp.Created {
		t.Fatalf("got %+v, want the created notification", resp)
	}
	w.put("/r/a", "a1")
	w.put("/r/b", "b1")
	w.put("/r/a", "a2")
	w.del("/r/b")
	w.txn(putW("/r/c", "c1"), delW("/r/a"), putW("/r/d", "d1"), putW("/other", "o2"))
	w.put("/r/x/1", "x1")
	w.put("/r/x/2", "x2")
	seen := collectEvents(ctx, t, live, len(model.events))
	requireModelEvents(t, seen, model.since(0, true))
	lastRev := seen[len(seen)-1].Kv.ModRevision
	stopWatch()

	// Phase 2, missed by the watcher: a recreated key, overwrites and a
	// delete of keys last written in phase 1 (their prev_kv is older than
	// lastRev), and a transaction that deletes a prefix.
	w.put("/r/a", "a4")
	w.put("/r/c", "c2")
	w.del("/r/d")
	w.put("/other", "o3")
	w.txn(putW("/r/e", "e1"), delPrefixW("/r/x/"), putW("/r/c", "c3"))
	w.put("/r/b", "b2")
	missed := model.since(lastRev+1, true)
	stopRev := currentRevision(ctx, t, s.cli)

	stop(t, s)
	if err := s.member().Restart(ctx); err != nil {
		t.Fatal(err)
	}
	cli := s.member().NewClient(t)
	w.cli = cli
	if rev := currentRevision(ctx, t, cli); rev != stopRev {
		t.Fatalf("revision %d after restart, %d before the stop", rev, stopRev)
	}

	// Resumed from the revision after the last one seen: exactly the
	// missed events, then live ones.
	plain := cli.Watch(ctx, "/r/", clientv3.WithPrefix(), clientv3.WithRev(lastRev+1))
	withPrev := cli.Watch(ctx, "/r/", clientv3.WithPrefix(), clientv3.WithRev(lastRev+1), clientv3.WithPrevKV())
	requireModelEvents(t, collectEvents(ctx, t, plain, len(missed)), model.since(lastRev+1, false))
	requireModelEvents(t, collectEvents(ctx, t, withPrev, len(missed)), missed)

	firstLive := currentRevision(ctx, t, cli) + 1
	w.put("/r/a", "a5")
	w.put("/other", "o4")
	w.txn(delW("/r/c"), putW("/r/f", "f1"))
	liveEvents := model.since(firstLive, true)
	requireModelEvents(t, collectEvents(ctx, t, plain, len(liveEvents)), model.since(firstLive, false))
	requireModelEvents(t, collectEvents(ctx, t, withPrev, len(liveEvents)), liveEvents)
	requireNothingPending(ctx, t, cli, currentRevision(ctx, t, cli), plain, withPrev)
}
