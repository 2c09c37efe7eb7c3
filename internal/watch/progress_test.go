package watch

import (
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestProgressRequest(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{})
	c := newClient(t, h)
	c.s.RequestProgress() // no watches: nothing, as etcd
	c.watch(&pb.WatchCreateRequest{Key: []byte("a")})
	publish(h, hist, put("b", "1"))
	rev := publish(h, hist, put("b", "2"))
	c.s.RequestProgress()
	r := c.next()
	if r.WatchID != InvalidWatchID || r.Revision != rev || r.Created || r.Canceled || len(r.Events) != 0 {
		t.Fatalf("got %s, want a progress notification at revision %d", fmtResp(r), rev)
	}
}

func TestProgressRequestDroppedWhileLagging(t *testing.T) {
	hist := newMemHistory()
	h := stagedHub(t, hist, Options{}) // no catch-up: the watch keeps lagging
	publish(h, hist, put("a", "1"))
	c := newClient(t, h)
	c.watch(&pb.WatchCreateRequest{Key: []byte("b")})
	c.watch(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 1})
	c.s.RequestProgress()
	if got := c.queued(); len(got) != 0 {
		t.Fatalf("got %v, want the request dropped", got)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.progressQ) != 0 {
		t.Fatal("a dropped request waits for the fan-out")
	}
}

// TestProgressRequestWaitsForFanOut stages a request that comes after a
// publication the fan-out has not handled: the answer must follow that
// publication's events and carry its revision.
func TestProgressRequestWaitsForFanOut(t *testing.T) {
	hist := newMemHistory()
	h := stagedHub(t, hist, Options{})
	c := newClient(t, h)
	id, _ := c.s.Watch(&pb.WatchCreateRequest{Key: []byte("a")})
	c.next()
	rev := publish(h, hist, put("a", "1"))
	c.s.RequestProgress()
	c.s.RequestProgress()
	if got := c.queued(); len(got) != 0 {
		t.Fatalf("got %v before the fan-out ran, want nothing", got)
	}
	h.start()
	if r := c.next(); r.WatchID != id || len(r.Events) != 1 {
		t.Fatalf("got %s, want the event first", fmtResp(r))
	}
	for range 2 {
		if r := c.next(); r.WatchID != InvalidWatchID || r.Revision != rev {
			t.Fatalf("got %s, want a progress notification at revision %d", fmtResp(r), rev)
		}
	}
}

func TestPeriodicProgress(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{}) // 10 minutes: the test ticks by hand
	c := newClient(t, h)
	a := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), ProgressNotify: true})
	c.watch(&pb.WatchCreateRequest{Key: []byte("b")})
	future := c.watch(&pb.WatchCreateRequest{Key: []byte("c"), ProgressNotify: true, StartRevision: 100})
	// Another stream, all synced, tells when the fan-out is done.
	fanned := newClient(t, h)
	fanned.watch(&pb.WatchCreateRequest{Key: []byte("z")})
	rev := publish(h, hist, put("b", "1"))
	fanned.sync()
	c.queued()
	h.progressTick(c.s)
	got := c.queued()
	if len(got) != 1 || got[0].WatchID != a || got[0].Revision != rev || len(got[0].Events) != 0 {
		t.Fatalf("first tick: got %v, want one progress notification for watch %d at %d (none for %d, not started)", got, a, rev, future)
	}
	publish(h, hist, put("a", "1"))
	fanned.sync()
	if got := c.queued(); len(got) != 1 || got[0].WatchID != a {
		t.Fatalf("got %v, want the event of watch %d", got, a)
	}
	h.progressTick(c.s)
	if got := c.queued(); len(got) != 0 {
		t.Fatalf("tick after an event: got %v, want nothing", got)
	}
	h.progressTick(c.s)
	if got := c.queued(); len(got) != 1 || got[0].WatchID != a {
		t.Fatalf("quiet tick: got %v, want a progress notification for watch %d", got, a)
	}
}

func TestPeriodicProgressTimer(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{ProgressNotifyInterval: time.Millisecond}) // raised to 100ms
	if h.progress != minProgressInterval {
		t.Fatalf("interval %v, want %v", h.progress, minProgressInterval)
	}
	c := newClient(t, h)
	id := c.watch(&pb.WatchCreateRequest{Key: []byte("a"), ProgressNotify: true})
	for range 2 {
		if r := c.next(); r.WatchID != id || r.Revision != 1 || len(r.Events) != 0 {
			t.Fatalf("got %s, want a progress notification for watch %d", fmtResp(r), id)
		}
	}
}
