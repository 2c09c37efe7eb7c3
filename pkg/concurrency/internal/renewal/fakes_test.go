package renewal

import (
	"context"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeClock is a Clock the test moves by hand. The Renewer's loop makes
// exactly one timer per pass, so the number of timers made so far tells
// the test when the loop has settled after an event.
type fakeClock struct {
	mu      sync.Mutex
	cond    *sync.Cond
	now     time.Time
	made    int
	pending []*fakeTimer
}

func newFakeClock() *fakeClock {
	c := &fakeClock{now: time.Unix(1_000_000, 0)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

type fakeTimer struct {
	c     *fakeClock
	ch    chan time.Time
	when  time.Time
	armed bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1), when: c.now.Add(d), armed: true}
	if d <= 0 {
		t.armed = false
		t.ch <- c.now
	} else {
		c.pending = append(c.pending, t)
	}
	c.made++
	c.cond.Broadcast()
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

// timers is how many timers the loop has made so far.
func (c *fakeClock) timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.made
}

// waitTimers blocks until the loop has made more than n timers, that is,
// it has finished the pass an event started and waits again.
func (c *fakeClock) waitTimers(t *testing.T, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		c.mu.Lock()
		for c.made <= n {
			c.cond.Wait()
		}
		c.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("the loop made no timer after %d", n)
	}
}

// next is the time the earliest armed timer fires.
func (c *fakeClock) next(t *testing.T) time.Time {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	for _, tm := range c.pending {
		if tm.armed && (at.IsZero() || tm.when.Before(at)) {
			at = tm.when
		}
	}
	if at.IsZero() {
		t.Fatal("no armed timer")
	}
	return at
}

// advanceTo moves the clock to at and fires every timer due by then.
func (c *fakeClock) advanceTo(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = at
	kept := c.pending[:0]
	for _, tm := range c.pending {
		switch {
		case !tm.armed:
		case !tm.when.After(at):
			tm.armed = false
			tm.ch <- at
		default:
			kept = append(kept, tm)
		}
	}
	c.pending = kept
}

// fireNext advances to the earliest timer and waits for the loop's next
// pass.
func (c *fakeClock) fireNext(t *testing.T) time.Time {
	t.Helper()
	n := c.timers()
	at := c.next(t)
	c.advanceTo(at)
	c.waitTimers(t, n)
	return at
}

// call is one KeepAliveOnce the Renewer made, answered by the test.
type call struct {
	ctx   context.Context
	reply chan callReply
}

type callReply struct {
	resp *clientv3.LeaseKeepAliveResponse
	err  error
}

// fakeLeases hands every KeepAliveOnce to the test on calls.
type fakeLeases struct{ calls chan call } // buffered: an attempt never waits for the test

func (f *fakeLeases) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	c := call{ctx: ctx, reply: make(chan callReply, 1)}
	f.calls <- c
	select {
	case r := <-c.reply:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// expectCall returns the call in flight.
func (f *fakeLeases) expectCall(t *testing.T) call {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal was sent")
		return call{}
	}
}

// noCall checks that no call is in flight.
func (f *fakeLeases) noCall(t *testing.T) {
	t.Helper()
	select {
	case <-f.calls:
		t.Fatal("unexpected renewal")
	default:
	}
}

func ttlReply(ttl int64) callReply {
	return callReply{resp: &clientv3.LeaseKeepAliveResponse{ID: 1, TTL: ttl}}
}
