package watch

import (
	"context"
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// fanOutEach publishes each commit in its own fan-out pass: another
// stream's progress request waits for the fan-out to reach the revision.
type fanOutEach struct {
	h      *Hub
	hist   *memHistory
	marker *client
}

func newFanOutEach(t *testing.T, h *Hub, hist *memHistory) *fanOutEach {
	marker := newClient(t, h)
	// A stream without watches gets no progress answer; this watch on a
	// key nobody writes makes it answer.
	marker.watch(&pb.WatchCreateRequest{Key: []byte("\xff marker")})
	return &fanOutEach{h: h, hist: hist, marker: marker}
}

func (f *fanOutEach) publish(ops ...op) int64 {
	rev := publish(f.h, f.hist, ops...)
	f.marker.sync()
	return rev
}

// eventRevs renders a response's watch ID and event revisions, and its
// header revision when it has no events.
func eventRevs(r Response) string {
	if len(r.Events) == 0 {
		return fmt.Sprintf("%d:@%d", r.WatchID, r.Revision)
	}
	revs := make([]string, len(r.Events))
	for i, ev := range r.Events {
		revs[i] = fmt.Sprint(ev.Kv.ModRevision)
	}
	return fmt.Sprintf("%d:%s", r.WatchID, strings.Join(revs, ","))
}

func eventRevsAll(rs []Response) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = eventRevs(r)
	}
	return strings.Join(out, " ")
}

// TestEventsMergeWhileQueued: while a client does not read, each
// watcher's new events join its response still in the queue, which keeps
// its place in the queue and takes the header revision of the last event.
func TestEventsMergeWhileQueued(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	f := newFanOutEach(t, h, hist)
	c := newClient(t, h)
	a := c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	b := c.watch(&pb.WatchCreateRequest{Key: []byte("b"), PrevKv: true})
	f.publish(put("a", "1"))           // 2
	f.publish(put("b", "1"))           // 3
	f.publish(put("a", "2"))           // 4
	f.publish(put("b", "2"), del("a")) // 5: a transaction
	last := f.publish(put("b", "3"))   // 6
	got := c.queued()
	if want := fmt.Sprintf("%d:2,4,5 %d:3,5,6", a, b); eventRevsAll(got) != want {
		t.Fatalf("got %s, want %s", eventRevsAll(got), want)
	}
	if got[0].Revision != last-1 || got[1].Revision != last {
		t.Fatalf("header revisions %d and %d, want %d and %d", got[0].Revision, got[1].Revision, last-1, last)
	}
	// prev_kv is filled in for every merged event.
	for i, ev := range got[1].Events[1:] {
		if ev.PrevKv == nil || string(ev.PrevKv.Value) != fmt.Sprint(i+1) {
			t.Fatalf("merged event %s lacks its previous value", fmtEvent(ev))
		}
	}
	// Once taken, a response takes no more events.
	rev := f.publish(put("a", "3"))
	if got := eventRevsAll(c.queued()); got != fmt.Sprintf("%d:%d", a, rev) {
		t.Fatalf("after the merged responses were taken, got %s", got)
	}
}

// TestControlResponseEndsMerging: events never join a response queued
// before a control response, so that nothing older than a progress
// notification follows it, and no event precedes it that it does not
// cover.
func TestControlResponseEndsMerging(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	f := newFanOutEach(t, h, hist)
	c := newClient(t, h)
	a := c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	first := f.publish(put("a", "1"))
	c.s.RequestProgress() // answered at once: the fan-out is at first
	second := f.publish(put("a", "2"))
	b, err := c.s.Watch(&pb.WatchCreateRequest{Key: []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	third := f.publish(put("a", "3"))
	want := fmt.Sprintf("%d:%d -1:@%d %d:%d %d:@%d %d:%d", a, first, first, a, second, b, second, a, third)
	if got := eventRevsAll(c.queued()); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// TestMergeLimits: a merged response stays within mergeMaxEvents events
// and mergeMaxBytes of payload; what would exceed them starts a new one.
func TestMergeLimits(t *testing.T) {
	t.Run("events", func(t *testing.T) {
		hist := newMemHistory()
		h := testHub(t, hist, Options{})
		f := newFanOutEach(t, h, hist)
		c := newClient(t, h)
		id := c.watch(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l")})
		ops := make([]op, mergeMaxEvents-1)
		for i := range ops {
			ops[i] = put(fmt.Sprintf("k%04d", i), "v")
		}
		f.publish(ops...)
		f.publish(put("k0000", "w")) // fills the response
		f.publish(put("k0001", "w")) // starts another
		got := c.queued()
		if len(got) != 2 || len(got[0].Events) != mergeMaxEvents || len(got[1].Events) != 1 || got[1].WatchID != id {
			t.Fatalf("got %d responses of %v events", len(got), func() []int {
				n := make([]int, len(got))
				for i, r := range got {
					n[i] = len(r.Events)
				}
				return n
			}())
		}
	})
	t.Run("bytes", func(t *testing.T) {
		hist := newMemHistory()
		h := testHub(t, hist, Options{StreamBufferBytes: 64 << 20})
		f := newFanOutEach(t, h, hist)
		c := newClient(t, h)
		id := c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
		big := strings.Repeat("v", mergeMaxBytes/3-eventOverhead-1)
		var revs []int64
		for range 4 {
			revs = append(revs, f.publish(put("a", big)))
		}
		want := fmt.Sprintf("%d:%d,%d,%d %d:%d", id, revs[0], revs[1], revs[2], id, revs[3])
		if got := eventRevsAll(c.queued()); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
}

// TestSharedEventsChargedOnce: 1,000 watchers of one key on a stream that
// is not read share each event, so the stream's budget counts the event
// once (plus a pointer per watcher): none of them lags, and each gets all
// the events in one response.
func TestSharedEventsChargedOnce(t *testing.T) {
	const watchers, revisions = 1000, 50
	hist := newMemHistory()
	const budget = 1 << 20
	h := testHub(t, hist, Options{StreamBufferBytes: budget})
	f := newFanOutEach(t, h, hist)
	c := newClient(t, h)
	for range watchers {
		c.watch(&pb.WatchCreateRequest{Key: []byte("k")})
	}
	value := strings.Repeat("v", 256)
	for range revisions {
		f.publish(put("k", value))
	}
	if n := metricValue(t, h.metrics.slow); n != 0 {
		t.Fatalf("%v watchers lag", n)
	}
	c.s.mu.Lock()
	queued := c.s.bytes
	c.s.mu.Unlock()
	perWatcherEvent := eventOverhead + 1 + len(value) // as if each had its own copy
	if queued >= watchers*revisions*perWatcherEvent/10 {
		t.Fatalf("the stream counts %d bytes queued for %d shared events", queued, revisions)
	}
	got := c.queued()
	if len(got) != watchers {
		t.Fatalf("got %d responses, want one per watcher", len(got))
	}
	for _, r := range got {
		if len(r.Events) != revisions {
			t.Fatalf("response %s, want all %d events", eventRevs(r), revisions)
		}
	}
	// Each charge left with the response that carried it.
	c.s.mu.Lock()
	left := c.s.bytes
	c.s.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d bytes still counted with nothing queued", left)
	}
}

// TestNextStopsAtWriteQuota: Next takes no more events than gRPC's write
// quota past the first response, leaving the rest queued, where they can
// still take in new events.
func TestNextStopsAtWriteQuota(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	f := newFanOutEach(t, h, hist)
	c := newClient(t, h)
	var ids []int64
	for range 3 {
		ids = append(ids, c.watch(&pb.WatchCreateRequest{Key: []byte("a")}))
	}
	f.publish(put("a", strings.Repeat("v", nextBatchBytes*5/8)))
	got, err := c.s.Next(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("Next took %d responses of %d bytes of events each, want 2", len(got), nextBatchBytes*5/8)
	}
	rev := f.publish(put("a", "small"))
	want := fmt.Sprintf("%d:%d,%d %d:%d %d:%d", ids[2], rev-1, rev, ids[0], rev, ids[1], rev)
	if got := eventRevsAll(c.queued()); got != want {
		t.Fatalf("then got %s, want %s", got, want)
	}
}
