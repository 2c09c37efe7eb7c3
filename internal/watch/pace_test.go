package watch

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestPacerTokenBucket(t *testing.T) {
	p := newPacer(10, 2) // a token every 100ms, 2 at most
	t0 := p.last
	tokens := func() int {
		n := 0
		for p.take() {
			n++
		}
		return n
	}
	if n := tokens(); n != 2 {
		t.Fatalf("a burst of %d tokens, want 2", n)
	}
	if d := p.wait(t0.Add(50*time.Millisecond), 1); d != 50*time.Millisecond {
		t.Fatalf("half a token earned: wait %v for one, want 50ms", d)
	}
	if d := p.wait(t0.Add(50*time.Millisecond), 5); d != 150*time.Millisecond {
		t.Fatalf("half a token earned: wait %v for a batch of 5, want 150ms (for the burst of 2)", d)
	}
	if d := p.wait(t0.Add(100*time.Millisecond), 1); d != 0 {
		t.Fatalf("after 100ms: wait %v, want none", d)
	}
	if n := tokens(); n != 1 {
		t.Fatalf("after 100ms: %d tokens, want 1", n)
	}
	p.wait(t0.Add(time.Hour), 1)
	if n := tokens(); n != 2 {
		t.Fatalf("an idle bucket holds %d tokens, want its burst of 2", n)
	}
	unpaced := newPacer(0, 0)
	for range 1000 {
		if unpaced.wait(time.Now(), 64) != 0 || !unpaced.take() {
			t.Fatal("a pacer without rate held a response back")
		}
	}
}

// testClock is a clock that moves only when the test says so.
type testClock struct {
	t0      time.Time
	elapsed atomic.Int64
}

func (c *testClock) now() time.Time          { return c.t0.Add(time.Duration(c.elapsed.Load())) }
func (c *testClock) advance(d time.Duration) { c.elapsed.Add(int64(d)) }

// stopClock gives the stream's pacer a clock of the test's.
func stopClock(s *Stream) *testClock {
	c := &testClock{t0: time.Now()}
	s.pace.now, s.pace.last = c.now, c.t0
	return c
}

// TestPacedStreamMerges: once a stream's burst is spent, event responses
// wait for tokens and take in the events that arrive meanwhile.
func TestPacedStreamMerges(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{StreamResponseRate: 20, StreamResponseBurst: 2})
	f := newFanOutEach(t, h, hist)
	c := newClient(t, h)
	clock := stopClock(c.s)
	var ids []int64
	for range 3 {
		ids = append(ids, c.watch(&pb.WatchCreateRequest{Key: []byte("k")})) // free: control
	}
	r1 := f.publish(put("k", "1"))
	got, err := c.s.Next(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d:%d %d:%d", ids[0], r1, ids[1], r1); eventRevsAll(got) != want {
		t.Fatalf("with a burst of 2, Next took %s, want %s", eventRevsAll(got), want)
	}
	r2 := f.publish(put("k", "2"))
	r3 := f.publish(put("k", "3"))
	// No token: Next waits (here, for the cancelled context only).
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := c.s.Next(canceled, nil); !errors.Is(err, context.Canceled) || len(got) != 0 {
		t.Fatalf("Next without tokens returned %s, %v", eventRevsAll(got), err)
	}
	// One token is not enough: Next waits for a batch (here, the burst).
	clock.advance(50 * time.Millisecond)
	if got, err := c.s.Next(canceled, nil); !errors.Is(err, context.Canceled) || len(got) != 0 {
		t.Fatalf("Next with one token for 3 responses returned %s, %v", eventRevsAll(got), err)
	}
	clock.advance(50 * time.Millisecond)
	got, err = c.s.Next(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d:%d,%d,%d %d:%d,%d", ids[2], r1, r2, r3, ids[0], r2, r3); eventRevsAll(got) != want {
		t.Fatalf("with two tokens, Next took %s, want %s", eventRevsAll(got), want)
	}
	clock.advance(50 * time.Millisecond)
	if got := eventRevsAll(c.queued()); got != fmt.Sprintf("%d:%d,%d", ids[1], r2, r3) {
		t.Fatalf("with another token for the last response, Next took %s", got)
	}
}

// TestPacedStreamControlResponses: a response without events is taken
// with no token left.
func TestPacedStreamControlResponses(t *testing.T) {
	hist := newMemHistory()
	h := testHub(t, hist, Options{StreamResponseRate: 1, StreamResponseBurst: 1})
	f := newFanOutEach(t, h, hist)
	c := newClient(t, h)
	stopClock(c.s)
	id := c.watch(&pb.WatchCreateRequest{Key: []byte("k")})
	rev := f.publish(put("k", "1"))
	if got := c.next(); got.WatchID != id || len(got.Events) != 1 {
		t.Fatalf("got %s, want the event at %d", eventRevs(got), rev)
	}
	c.s.RequestProgress() // the burst is spent
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := c.s.Next(canceled, nil)
	if err != nil || len(got) != 1 || got[0].WatchID != InvalidWatchID || got[0].Revision != rev {
		t.Fatalf("Next without tokens returned %s, %v; want the progress notification at %d", eventRevsAll(got), err, rev)
	}
}
