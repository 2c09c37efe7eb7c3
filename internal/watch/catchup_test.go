package watch

import (
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestSlowConsumerCatchesUp(t *testing.T) {
	hist := newMemHistory()
	const budget = 4096
	h := testHub(t, hist, Options{StreamBufferBytes: budget})
	c := newClient(t, h)
	slow := c.watch(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l")})
	other := newClient(t, h)
	fast := other.watch(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l")})
	var want []string
	value := strings.Repeat("v", 100)
	for i := range 300 {
		key := fmt.Sprintf("k%03d", i%50)
		rev := publish(h, hist, put(key, value))
		want = append(want, fmt.Sprintf("%s@%d", key, rev))
		// The other stream keeps up: it is never held back.
		r := other.next()
		if r.WatchID != fast || len(r.Events) != 1 || r.Events[0].Kv.ModRevision != rev {
			t.Fatalf("fast stream got %s, want the event of revision %d", fmtResp(r), rev)
		}
	}
	if slowWatchers := metricValue(t, h.metrics.slow); slowWatchers != 1 {
		t.Fatalf("slow watcher gauge %v, want 1", slowWatchers)
	}
	c.s.mu.Lock()
	queued := c.s.bytes
	c.s.mu.Unlock()
	if queued > budget+responseOverhead+pointerSize+eventOverhead+100+4 {
		t.Fatalf("slow stream queued %d bytes, budget %d", queued, budget)
	}
	var got []string
	for len(got) < len(want) {
		r := c.next()
		if r.WatchID != slow {
			t.Fatalf("got %s", fmtResp(r))
		}
		for _, ev := range r.Events {
			got = append(got, fmt.Sprintf("%s@%d", ev.Kv.Key, ev.Kv.ModRevision))
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("slow watcher got\n%v\nwant\n%v", got, want)
	}
	rev := publish(h, hist, put("k000", "live"))
	if r := c.next(); r.WatchID != slow || r.Events[0].Kv.ModRevision != rev {
		t.Fatalf("got %s, want the live event at %d", fmtResp(r), rev)
	}
	if slowWatchers := metricValue(t, h.metrics.slow); slowWatchers != 0 {
		t.Fatalf("slow watcher gauge %v after catching up, want 0", slowWatchers)
	}
}

func TestSlowConsumerCompacted(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{StreamBufferBytes: 1024})
	c := newClient(t, h)
	id := c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	fanned := newClient(t, h)
	fanned.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	var last int64
	for i := range 100 {
		// One fan-out pass per revision, so that the queue fills up.
		last = publish(h, hist, put("a", fmt.Sprint(i)))
		fanned.sync()
	}
	hist.compactAt(last)
	next := int64(2)
	for {
		r := c.next()
		if r.Canceled {
			if r.WatchID != id || r.CompactRevision != last || r.Revision != 0 {
				t.Fatalf("got %s, want watch %d canceled with compact revision %d", fmtResp(r), id, last)
			}
			if next >= last {
				t.Fatalf("canceled after receiving up to %d, though revision %d was still available", next-1, last)
			}
			return
		}
		for _, ev := range r.Events {
			if ev.Kv.ModRevision != next {
				t.Fatalf("got event at %d, want %d", ev.Kv.ModRevision, next)
			}
			next++
		}
		if next > last {
			t.Fatal("received every event, but the watcher must have fallen below the compaction")
		}
	}
}

func TestPublishGapResyncs(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	id := c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	publish(h, hist, put("a", "1")) // 2
	// A restored snapshot: the store moved on without publishing.
	hist.commit(put("a", "2"))             // 3
	hist.commit(put("b", "1"))             // 4
	hist.commit(del("a"))                  // 5
	rev, evs := hist.commit(put("a", "3")) // 6
	h.Publish(rev, evs)                    // skips 3..5
	c.expectEvents(id, "PUT a@2=1(c2,v1)", "PUT a@3=2(c2,v2)", "DELETE a@5", "PUT a@6=3(c6,v1)")
	publish(h, hist, put("a", "4"))
	c.expectEvents(id, "PUT a@7=4(c6,v2)")
}

func TestBacklogOverflow(t *testing.T) {
	hist := newMemHistory()
	h := stagedHub(t, hist, Options{BacklogEvents: 4})
	c := newClient(t, h)
	id, _ := c.s.Watch(&pb.WatchCreateRequest{Key: []byte("a")})
	c.next()
	var want []string
	for i := range 10 {
		rev := publish(h, hist, put("a", fmt.Sprint(i)))
		want = append(want, fmt.Sprintf("PUT a@%d=%d(c2,v%d)", rev, i, i+1))
	}
	h.pubMu.Lock()
	if len(h.backlog) != 1 || !h.backlog[0].resync {
		t.Fatalf("backlog %+v, want one resync gap", h.backlog)
	}
	h.pubMu.Unlock()
	h.start()
	c.expectEvents(id, want...)
}

func TestCatchUpRetriesHistoryErrors(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	publish(h, hist, put("a", "1"))
	hist.mu.Lock()
	hist.failReads = 1
	hist.mu.Unlock()
	c := newClient(t, h)
	id := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 1})
	c.expectEvents(id, "PUT a@2=1(c2,v1)")
}
