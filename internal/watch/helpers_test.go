package watch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// waitTimeout bounds every wait for a response; generous for a loaded
// 2-core machine running -race.
const waitTimeout = 20 * time.Second

// testHub starts a hub over hist, closed when the test ends.
func testHub(t testing.TB, hist History, opts Options) *Hub {
	t.Helper()
	opts.ErrCompacted = errTestCompacted
	h, err := NewHub(hist, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// stagedHub builds a hub whose goroutines the test starts with h.start().
func stagedHub(t testing.TB, hist History, opts Options) *Hub {
	t.Helper()
	opts.ErrCompacted = errTestCompacted
	h, err := newHub(hist, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// client is a test's view of one stream: it reads responses in order.
type client struct {
	t   testing.TB
	s   *Stream
	buf []Response
	// created is the created response of the last watch.
	created Response
}

func newClient(t testing.TB, h *Hub) *client {
	s := h.NewStream()
	t.Cleanup(s.Close)
	return &client{t: t, s: s}
}

// next returns the next response, failing the test after waitTimeout.
func (c *client) next() Response {
	c.t.Helper()
	if len(c.buf) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		got, err := c.s.Next(ctx, nil)
		if err != nil {
			logHubState(c.t, c.s.hub)
			c.t.Fatalf("waiting for a watch response: %v", err)
		}
		c.buf = got
	}
	r := c.buf[0]
	c.buf = c.buf[1:]
	return r
}

// queued returns the responses already queued, without waiting.
func (c *client) queued() []Response {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		got, err := c.s.Next(ctx, nil)
		if errors.Is(err, context.Canceled) {
			break
		}
		if err != nil {
			c.t.Fatalf("reading queued responses: %v", err)
		}
		c.buf = append(c.buf, got...)
	}
	out := c.buf
	c.buf = nil
	return out
}

// watch creates a watch and checks the created response.
func (c *client) watch(req *pb.WatchCreateRequest) int64 {
	c.t.Helper()
	id, err := c.s.Watch(req)
	if err != nil {
		c.t.Fatalf("watch %q: %v", req.Key, err)
	}
	r := c.next()
	if !r.Created || r.Canceled || r.WatchID != id {
		c.t.Fatalf("got %s, want created response for watch %d", fmtResp(r), id)
	}
	c.created = r
	return id
}

// sync requests progress and returns the responses queued before the
// answer, which shows that everything published before the request is
// queued. Every watch of the stream must be synced.
func (c *client) sync() []Response {
	c.t.Helper()
	c.s.RequestProgress()
	var before []Response
	for {
		r := c.next()
		if r.WatchID == InvalidWatchID && !r.Created && len(r.Events) == 0 {
			return before
		}
		before = append(before, r)
	}
}

// fmtResp renders a response compactly for failure messages.
func fmtResp(r Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{id=%d rev=%d", r.WatchID, r.Revision)
	if r.Created {
		b.WriteString(" created")
	}
	if r.Canceled {
		fmt.Fprintf(&b, " canceled(%q)", r.CancelReason)
	}
	if r.CompactRevision != 0 {
		fmt.Fprintf(&b, " compact=%d", r.CompactRevision)
	}
	if len(r.Events) > 0 {
		fmt.Fprintf(&b, " events=%s", fmtEvents(r.Events))
	}
	b.WriteString("}")
	return b.String()
}

func fmtEvents(evs []*mvccpb.Event) string {
	parts := make([]string, len(evs))
	for i, ev := range evs {
		parts[i] = fmtEvent(ev)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtEvent(ev *mvccpb.Event) string {
	s := fmt.Sprintf("%s %s@%d", ev.Type, ev.Kv.Key, ev.Kv.ModRevision)
	if ev.Type == mvccpb.PUT {
		s += fmt.Sprintf("=%s(c%d,v%d)", ev.Kv.Value, ev.Kv.CreateRevision, ev.Kv.Version)
	}
	if ev.PrevKv != nil {
		s += fmt.Sprintf("<prev %s@%d=%s>", ev.PrevKv.Key, ev.PrevKv.ModRevision, ev.PrevKv.Value)
	}
	return s
}

// publish commits ops to hist as one revision and publishes it.
func publish(h *Hub, hist *memHistory, ops ...op) int64 {
	rev, evs := hist.commit(ops...)
	h.Publish(rev, evs)
	return rev
}

// expectEvents reads responses for watch id until it has n events, and
// checks they render as want. Other responses fail the test.
func (c *client) expectEvents(id int64, want ...string) {
	c.t.Helper()
	var got []string
	for len(got) < len(want) {
		r := c.next()
		if r.WatchID != id || len(r.Events) == 0 || r.Canceled || r.Created {
			c.t.Fatalf("got %s while waiting for events %q of watch %d (have %q)", fmtResp(r), want, id, got)
		}
		for _, ev := range r.Events {
			got = append(got, fmtEvent(ev))
		}
		if last := r.Events[len(r.Events)-1].Kv.ModRevision; r.Revision < last {
			c.t.Fatalf("response %s has a header revision below its last event", fmtResp(r))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		c.t.Fatalf("watch %d got events\n  %s\nwant\n  %s", id, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// metricValue reads a gauge or counter.
func metricValue(t testing.TB, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Gauge != nil {
		return out.Gauge.GetValue()
	}
	return out.Counter.GetValue()
}

// logHubState logs the hub's revisions and every watcher's state, to
// explain a wait that timed out.
func logHubState(t testing.TB, h *Hub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("published %d, fanned out %d, %d streams with lagging watchers, %d progress requests waiting",
		h.pubRev.Load(), h.fanRev, len(h.lagStreams), len(h.progressQ))
	for s := range h.streams {
		t.Logf(" stream: %d watchers, %d lagging, progress asked %d (target %d)", len(s.watchers), len(s.lagging), s.progressAsked, s.progressTarget)
		for _, w := range s.watchers {
			t.Logf("  watch %d: state %d, minRev %d, startRev %d", w.id, w.state, w.minRev, w.startRev)
		}
	}
}
