package watch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func TestWatchFromNow(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	publish(h, hist, put("a", "0")) // rev 2, before the watch
	c := newClient(t, h)
	id := c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	if id != 0 || c.created.Revision != 2 {
		t.Fatalf("created %s, want watch 0 at revision 2", fmtResp(c.created))
	}
	publish(h, hist, put("a", "1"))
	publish(h, hist, put("b", "x"))
	publish(h, hist, put("a", "2"))
	publish(h, hist, del("a"))
	c.expectEvents(id, "PUT a@3=1(c2,v2)", "PUT a@5=2(c2,v3)", "DELETE a@6")
}

func TestWatchHeaderRevisionOfEachCommit(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	id := c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	for i := range 5 {
		rev := publish(h, hist, put("a", fmt.Sprint(i)))
		r := c.next()
		if r.WatchID != id || r.Revision != rev || len(r.Events) != 1 || r.Events[0].Kv.ModRevision != rev {
			t.Fatalf("got %s, want the event of revision %d with header revision %d", fmtResp(r), rev, rev)
		}
	}
}

func TestWatchKeyRanges(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	watches := []struct {
		name string
		req  *pb.WatchCreateRequest
		want []string // keys, in publish order
	}{
		{"key", &pb.WatchCreateRequest{Key: []byte("ab")}, []string{"ab"}},
		{"prefix", &pb.WatchCreateRequest{Key: []byte("ab"), RangeEnd: []byte("ac")}, []string{"ab", "abc"}},
		{"range", &pb.WatchCreateRequest{Key: []byte("a"), RangeEnd: []byte("b")}, []string{"a", "ab", "abc"}},
		{"from key", &pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte{0}}, []string{"b", "c"}},
		{"everything", &pb.WatchCreateRequest{RangeEnd: []byte{0}}, []string{"\x00", "a", "ab", "abc", "b", "c"}},
		{"empty key", &pb.WatchCreateRequest{}, []string{"\x00"}},
		{"same prefix again", &pb.WatchCreateRequest{Key: []byte("ab"), RangeEnd: []byte("ac")}, []string{"ab", "abc"}},
	}
	ids := make([]int64, len(watches))
	for i, w := range watches {
		ids[i] = c.watch(w.req)
	}
	keys := []string{"\x00", "a", "ab", "abc", "b", "c"}
	for _, k := range keys {
		publish(h, hist, put(k, "v"))
	}
	got := make(map[int64][]string)
	for _, r := range c.sync() {
		for _, ev := range r.Events {
			got[r.WatchID] = append(got[r.WatchID], string(ev.Kv.Key))
		}
	}
	for i, w := range watches {
		if g := strings.Join(got[ids[i]], ","); g != strings.Join(w.want, ",") {
			t.Errorf("%s: got keys %q, want %q", w.name, got[ids[i]], w.want)
		}
	}
}

func TestWatchStartRevision(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	publish(h, hist, put("a", "1")) // 2
	publish(h, hist, put("b", "1")) // 3
	publish(h, hist, put("a", "2")) // 4
	publish(h, hist, put("c", "1")) // 5
	publish(h, hist, put("a", "3")) // 6
	hist.compactAt(3)
	c := newClient(t, h)

	fromCompacted := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 3})
	c.expectEvents(fromCompacted, "PUT a@4=2(c2,v2)", "PUT a@6=3(c2,v3)")
	fromPast := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), RangeEnd: []byte("d"), StartRevision: 5})
	c.expectEvents(fromPast, "PUT c@5=1(c5,v1)", "PUT a@6=3(c2,v3)")
	publish(h, hist, put("a", "4")) // 7: both watchers are live again
	got := c.sync()
	if len(got) != 2 || got[0].Events[0].Kv.ModRevision != 7 || got[1].Events[0].Kv.ModRevision != 7 {
		t.Fatalf("after catching up got %v, want one event at revision 7 per watch", got)
	}
}

func TestWatchFutureStartRevision(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	id := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 4})
	publish(h, hist, put("a", "1")) // 2
	c.s.RequestProgress()           // dropped: the watch has not started
	publish(h, hist, put("a", "2")) // 3
	publish(h, hist, put("a", "3")) // 4
	publish(h, hist, put("a", "4")) // 5
	c.expectEvents(id, "PUT a@4=3(c2,v3)", "PUT a@5=4(c2,v4)")
	if got := c.sync(); len(got) != 0 {
		t.Fatalf("got %v before the progress notification, want nothing", got)
	}
}

func TestWatchFilters(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	noPut := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}})
	noDel := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}})
	c.watch(&pb.WatchCreateRequest{Key: []byte("a"), Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT, pb.WatchCreateRequest_NODELETE}})
	publish(h, hist, put("a", "1"))
	publish(h, hist, del("a"))
	publish(h, hist, put("a", "2"))
	got := make(map[int64][]string)
	for _, r := range c.sync() {
		for _, ev := range r.Events {
			got[r.WatchID] = append(got[r.WatchID], fmtEvent(ev))
		}
	}
	want := map[int64][]string{
		noPut: {"DELETE a@3"},
		noDel: {"PUT a@2=1(c2,v1)", "PUT a@4=2(c4,v1)"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestWatchPrevKV(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	live := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), PrevKv: true})
	plain := c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	publish(h, hist, put("a", "1"))
	publish(h, hist, put("a", "2"))
	publish(h, hist, del("a"))
	publish(h, hist, put("a", "3"))
	want := []string{"PUT a@2=1(c2,v1)", "PUT a@3=2(c2,v2)<prev a@2=1>", "DELETE a@4<prev a@3=2>", "PUT a@5=3(c5,v1)"}
	got := make(map[int64][]string)
	for _, r := range c.sync() {
		for _, ev := range r.Events {
			got[r.WatchID] = append(got[r.WatchID], fmtEvent(ev))
		}
	}
	if g := strings.Join(got[live], " "); g != strings.Join(want, " ") {
		t.Fatalf("prev_kv watch got %s, want %s", g, strings.Join(want, " "))
	}
	for _, e := range got[plain] {
		if strings.Contains(e, "prev") {
			t.Fatalf("watch without prev_kv got %s", e)
		}
	}
	replay := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), PrevKv: true, StartRevision: 1})
	c.expectEvents(replay, want...)
}

func TestWatchIDs(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	for i, tc := range []struct {
		req    *pb.WatchCreateRequest
		wantID int64
		reason string
	}{
		{&pb.WatchCreateRequest{Key: []byte("a")}, 0, ""},
		{&pb.WatchCreateRequest{Key: []byte("a")}, 1, ""},
		{&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 3}, 3, ""},
		{&pb.WatchCreateRequest{Key: []byte("a")}, 2, ""},
		{&pb.WatchCreateRequest{Key: []byte("a")}, 4, ""}, // 3 is taken
		{&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 3}, -1, "mvcc: duplicate watch ID provided on the WatchStream"},
		{&pb.WatchCreateRequest{Key: []byte("a"), WatchId: -1}, -1, ""}, // etcd accepts it
		{&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: -1}, -1, "etcdserver: mvcc: required revision has been compacted"},
		{&pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte("a")}, -1, "mvcc: watcher range is empty"},
		{&pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte("b")}, -1, "mvcc: watcher range is empty"},
	} {
		id, err := c.s.Watch(tc.req)
		r := c.next()
		if id != tc.wantID || r.WatchID != tc.wantID || !r.Created || r.Revision != 1 {
			t.Fatalf("case %d: got id %d and %s, want id %d created at revision 1", i, id, fmtResp(r), tc.wantID)
		}
		if tc.reason == "" {
			if err != nil || r.Canceled {
				t.Fatalf("case %d: got error %v, response %s; want success", i, err, fmtResp(r))
			}
			continue
		}
		if err == nil || err.Error() != tc.reason || !r.Canceled || r.CancelReason != tc.reason {
			t.Fatalf("case %d: got error %v, response %s; want refusal %q", i, err, fmtResp(r), tc.reason)
		}
	}
}

func TestWatchCancel(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	a := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 10})
	b := c.watch(&pb.WatchCreateRequest{Key: []byte("b")})
	publish(h, hist, put("a", "1")) // 2
	if got := c.sync(); len(got) != 1 || got[0].WatchID != a {
		t.Fatalf("got %v, want the event of watch %d", got, a)
	}
	if !c.s.Cancel(a) {
		t.Fatal("cancel of an existing watch failed")
	}
	if c.s.Cancel(a) || c.s.Cancel(99) {
		t.Fatal("cancel of a missing watch succeeded")
	}
	publish(h, hist, put("a", "2"))
	publish(h, hist, put("b", "1"))
	got := c.sync()
	if len(got) != 2 {
		t.Fatalf("got %d responses, want 2: %v", len(got), got)
	}
	// The canceled response, then nothing more for the watch.
	if r := got[0]; r.WatchID != a || !r.Canceled || r.Created || r.Revision != 2 || r.CancelReason != "" {
		t.Fatalf("got %s, want watch %d canceled at revision 2", fmtResp(r), a)
	}
	if got[1].WatchID != b {
		t.Fatalf("got %s, want the event of watch %d", fmtResp(got[1]), b)
	}
	// The ID is free again.
	if id, err := c.s.Watch(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: a}); err != nil || id != a {
		t.Fatalf("re-watch with id %d: got %d, %v", a, id, err)
	}
}

func TestStreamClose(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	c.watch(&pb.WatchCreateRequest{Key: []byte("a"), RangeEnd: []byte("b")})
	c.watch(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 1})
	c.s.Close()
	if _, err := c.s.Next(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: got %v, want ErrClosed", err)
	}
	if _, err := c.s.Watch(&pb.WatchCreateRequest{Key: []byte("a")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Watch after Close: got %v, want ErrClosed", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.index.keys) != 0 || h.index.ranges != nil || len(h.lagStreams) != 0 || len(h.streams) != 0 {
		t.Fatalf("hub still holds the closed stream's watches: keys %d, ranges %v, lagging streams %d, streams %d",
			len(h.index.keys), h.index.ranges != nil, len(h.lagStreams), len(h.streams))
	}
	if n := metricValue(t, h.metrics.watchers); n != 0 {
		t.Fatalf("watcher gauge is %v after close, want 0", n)
	}
}

func TestHubClose(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	done := make(chan error, 1)
	go func() {
		_, err := c.s.Next(context.Background(), nil)
		done <- err
	}()
	h.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Next on a closed hub: got %v, want ErrClosed", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Next did not return after the hub closed")
	}
	s := h.NewStream()
	if _, err := s.Watch(&pb.WatchCreateRequest{Key: []byte("a")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Watch on a closed hub: got %v, want ErrClosed", err)
	}
	h.Publish(5, nil) // must not panic or block
}

func TestWatchCompacted(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	for i := range 4 {
		publish(h, hist, put("a", fmt.Sprint(i))) // 2..5
	}
	hist.compactAt(4)
	c := newClient(t, h)
	id, _ := c.s.Watch(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 3, WatchId: 7})
	if r := c.next(); !r.Created || r.WatchID != id || r.Revision != 5 {
		t.Fatalf("got %s, want watch %d created at revision 5", fmtResp(r), id)
	}
	if r := c.next(); r.WatchID != id || !r.Canceled || r.CompactRevision != 4 || r.Revision != 0 || len(r.Events) != 0 {
		t.Fatalf("got %s, want watch %d canceled with compact revision 4 and header revision 0", fmtResp(r), id)
	}
	// Like etcd, the compacted watch keeps its ID until canceled, and
	// keeps the stream from being reported in sync.
	if _, err := c.s.Watch(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 7}); !errors.Is(err, ErrDuplicateID) {
		t.Fatalf("reusing the compacted watch's ID: got %v, want ErrDuplicateID", err)
	}
	c.next() // the refusal
	c.s.RequestProgress()
	if !c.s.Cancel(id) {
		t.Fatal("cancel of the compacted watch failed")
	}
	if r := c.next(); r.WatchID != id || !r.Canceled || r.CompactRevision != 0 || r.Revision != 5 {
		t.Fatalf("got %s, want watch %d canceled at revision 5 (the progress request was dropped)", fmtResp(r), id)
	}
}

func TestWatchTxnInOneResponse(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	live := c.watch(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l")})
	publish(h, hist, put("k1", "a"), put("k2", "b"), put("x", "c"), del("k1"))
	r := c.next()
	if r.WatchID != live || len(r.Events) != 3 {
		t.Fatalf("got %s, want the transaction's 3 events on k* in one response", fmtResp(r))
	}
	replay := c.watch(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l"), StartRevision: 1})
	if r := c.next(); r.WatchID != replay || len(r.Events) != 3 {
		t.Fatalf("got %s, want the transaction's 3 events on k* in one response", fmtResp(r))
	}
}

func TestWatchFragmentFlag(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	frag := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), Fragment: true})
	publish(h, hist, put("a", "1"))
	if r := c.next(); r.WatchID != frag || !r.Fragment {
		t.Fatalf("got %s (fragment %v), want an event response marked for fragmentation", fmtResp(r), r.Fragment)
	}
}

func TestNewHubErrors(t *testing.T) {
	hist := newMemHistory()
	if _, err := NewHub(nil, Options{ErrCompacted: errTestCompacted}); err == nil {
		t.Fatal("NewHub without history succeeded")
	}
	if _, err := NewHub(hist, Options{}); err == nil {
		t.Fatal("NewHub without ErrCompacted succeeded")
	}
	reg := prometheus.NewRegistry()
	h := testHub(t, hist, Options{Metrics: reg})
	c := newClient(t, h)
	c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	if n := metricValue(t, h.metrics.watchers); n != 1 {
		t.Fatalf("watcher gauge %v, want 1", n)
	}
	if _, err := NewHub(hist, Options{ErrCompacted: errTestCompacted, Metrics: reg}); err == nil {
		t.Fatal("registering the metrics twice succeeded")
	}
}

func TestContiguous(t *testing.T) {
	evs := func(revs ...int64) []mvccpb.Event {
		out := make([]mvccpb.Event, len(revs))
		for i, r := range revs {
			out[i] = mvccpb.Event{Kv: &mvccpb.KeyValue{ModRevision: r}}
		}
		return out
	}
	for _, tc := range []struct {
		prev, rev int64
		events    []mvccpb.Event
		want      bool
	}{
		{5, 6, evs(6), true},
		{5, 6, evs(6, 6, 6), true},
		{5, 7, evs(6, 7, 7), true},
		{5, 6, evs(5, 6), false}, // revision 5 was published already
		{5, 7, evs(6), false},    // 7 is missing
		{5, 7, evs(7), false},    // 6 is missing
		{5, 7, evs(6, 8), false},
		{5, 6, nil, false},
		{5, 6, evs(7, 6), false},
	} {
		if got := contiguous(tc.prev, tc.rev, tc.events); got != tc.want {
			t.Errorf("contiguous(%d, %d, %d events): got %v, want %v", tc.prev, tc.rev, len(tc.events), got, tc.want)
		}
	}
}
