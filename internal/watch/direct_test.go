package watch

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// backlogLen is the number of publications waiting for the fan-out.
func backlogLen(h *Hub) int {
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	return len(h.backlog)
}

// TestDirectDelivery: with the fan-out idle, a commit few watchers want is
// queued on their streams before Publish returns, and a commit nobody
// wants neither waits in the backlog nor wakes the fan-out.
func TestDirectDelivery(t *testing.T) {
	hist := newMemHistory()
	h := stagedHub(t, hist, Options{})
	h.mu.Lock()
	h.running = true // the fan-out "runs" but never takes anything: direct delivery only
	h.mu.Unlock()

	rev := publish(h, hist, put("a", "0")) // no stream open
	if n := backlogLen(h); n != 0 {
		t.Fatalf("a commit nobody watches left %d publications in the backlog", n)
	}
	select {
	case <-h.fanWake:
		t.Fatal("a commit nobody watches woke the fan-out")
	default:
	}
	c := newClient(t, h)
	id, _ := c.s.Watch(&pb.WatchCreateRequest{Key: []byte("a")})
	if r := c.next(); !r.Created || r.Revision != rev {
		t.Fatalf("got %s, want the created response at revision %d", fmtResp(r), rev)
	}
	rev = publish(h, hist, put("a", "1"), put("b", "1"))
	got := c.queued()
	if len(got) != 1 || got[0].WatchID != id || got[0].Revision != rev || fmtEvents(got[0].Events) != "[PUT a@3=1(c2,v2)]" {
		t.Fatalf("right after Publish: queued %v, want watch %d's event at revision %d", got, id, rev)
	}
	c.s.RequestProgress()
	if r := c.queued(); len(r) != 1 || r[0].WatchID != InvalidWatchID || r[0].Revision != rev {
		t.Fatalf("progress right after a direct delivery: %v, want one notification at %d", r, rev)
	}
}

// TestDirectDeliveryBounds: a commit that concerns more watchers or groups
// than directMaxWatchers, or comes while the hub's lock is held, waits for
// the fan-out, and so does every commit after it until the fan-out has
// caught up; all arrive in order.
func TestDirectDeliveryBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch func(i int) *pb.WatchCreateRequest
		n     int
		lock  bool
	}{
		{"watchers", func(int) *pb.WatchCreateRequest { return &pb.WatchCreateRequest{Key: []byte("k")} }, directMaxWatchers + 1, false},
		{"range-groups", func(i int) *pb.WatchCreateRequest {
			// Distinct ranges, all containing "k".
			return &pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte(fmt.Sprintf("l%04d", i))}
		}, directMaxWatchers + 1, false},
		{"lock-held", func(int) *pb.WatchCreateRequest { return &pb.WatchCreateRequest{Key: []byte("k")} }, 1, true},
		// A watcher catching up from History (the catch-up path does not
		// run before h.start) holds every commit in the backlog.
		{"lagging", func(int) *pb.WatchCreateRequest { return &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 1} }, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hist := newMemHistory()
			h := stagedHub(t, hist, Options{})
			h.mu.Lock()
			h.running = true
			h.mu.Unlock()
			many := newClient(t, h)
			for i := range tc.n {
				if _, err := many.s.Watch(tc.watch(i)); err != nil {
					t.Fatal(err)
				}
			}
			many.queued()
			few := newClient(t, h)
			id := few.watch(&pb.WatchCreateRequest{Key: []byte("z")})

			if tc.lock {
				h.mu.Lock()
			}
			publish(h, hist, put("zz", "0"), put("k", "1")) // 2
			if tc.lock {
				h.mu.Unlock()
			}
			publish(h, hist, put("z", "1")) // 3: few watchers, but behind the backlog
			if n := backlogLen(h); n != 2 {
				t.Fatalf("%d publications in the backlog, want both", n)
			}
			if got := few.queued(); len(got) != 0 {
				t.Fatalf("delivered %v ahead of the backlog", got)
			}
			h.start()
			few.expectEvents(id, "PUT z@3=1(c3,v1)")
			got := 0
			for got < tc.n {
				r := many.next()
				if len(r.Events) != 1 || r.Events[0].Kv.ModRevision != 2 {
					t.Fatalf("got %s, want the event of revision 2", fmtResp(r))
				}
				got++
			}
			if tc.name == "lagging" {
				return // when the catch-up path hands it back is its own
			}
			// Both deliveries above happened inside the fan-out's pass, which
			// holds h.mu: taking the lock waits for that pass to end.
			h.mu.Lock()
			//lint:ignore SA2001 the empty critical section is the barrier
			h.mu.Unlock()
			publish(h, hist, put("z", "2")) // the fan-out caught up: direct again
			if r := few.queued(); len(r) != 1 {
				t.Fatalf("right after Publish: queued %v, want one response", r)
			}
		})
	}
}
