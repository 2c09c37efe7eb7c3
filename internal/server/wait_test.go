package server

import (
	"sync"
	"testing"
	"time"

	"github.com/metastore-io/metastore/internal/statemachine"
)

func TestWaitRegistryDeliversOnce(t *testing.T) {
	w := newWaitRegistry()
	ch := w.Register(7)
	w.Trigger(7, statemachine.Result{Resp: "ok"})
	w.Trigger(7, statemachine.Result{Resp: "again"}) // no waiter any more: no-op
	select {
	case r := <-ch:
		if r.Resp != "ok" {
			t.Fatalf("got %v", r.Resp)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("result not delivered")
	}
	select {
	case r := <-ch:
		t.Fatalf("second delivery %v", r)
	default:
	}
}

func TestWaitRegistryCancelAndUnknown(t *testing.T) {
	w := newWaitRegistry()
	ch := w.Register(1)
	w.Cancel(1)
	w.Trigger(1, statemachine.Result{Resp: "late"})
	w.Trigger(12345, statemachine.Result{}) // replayed entry nobody waits for
	select {
	case r := <-ch:
		t.Fatalf("cancelled waiter got %v", r)
	default:
	}
}

// TestWaitRegistryExpires checks that only waits past their deadline are
// answered errWaitExpired, and that the expiry loop does it on its own
// and answers every wait, and every later one, with ErrStopped once
// stopped.
func TestWaitRegistryExpires(t *testing.T) {
	w := newWaitRegistry()
	now := time.Now()
	past := w.RegisterUntil(1, now.Add(-time.Millisecond))
	future := w.RegisterUntil(2, now.Add(time.Hour))
	untimed := w.Register(3)
	w.expire(now)
	if r := <-past; r.Err != errWaitExpired {
		t.Fatalf("past deadline: %v, want errWaitExpired", r.Err)
	}
	for _, ch := range []<-chan statemachine.Result{future, untimed} {
		select {
		case r := <-ch:
			t.Fatalf("answered before its deadline: %v", r)
		default:
		}
	}
	if n := w.timed.Load(); n != 1 {
		t.Fatalf("%d timed waits counted, want 1", n)
	}

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.expireLoop(stop, nil)
	}()
	soon := w.RegisterUntil(4, time.Now().Add(expiryInterval))
	select {
	case r := <-soon:
		if r.Err != errWaitExpired {
			t.Fatalf("expiry loop answered %v", r.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("expiry loop did not answer a wait past its deadline")
	}
	close(stop)
	<-done
	for _, ch := range []<-chan statemachine.Result{future, untimed, w.Register(5)} {
		select {
		case r := <-ch:
			if r.Err != ErrStopped {
				t.Fatalf("after stop: %v, want ErrStopped", r.Err)
			}
		default:
			t.Fatal("a wait was not answered when the loop stopped")
		}
	}
	w.Trigger(2, statemachine.Result{Resp: "late"}) // answered already: no-op, no block
	if n := w.timed.Load(); n != 0 {
		t.Fatalf("%d timed waits counted after stop, want 0", n)
	}
}

func TestRequestIDsUniqueUnderConcurrency(t *testing.T) {
	g := newRequestIDs(0xabcd, time.Unix(1700000000, 0))
	const workers, per = 8, 2000
	var mu sync.Mutex
	seen := make(map[uint64]bool, workers*per)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]uint64, per)
			for i := range local {
				local[i] = g.Next()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("duplicate id %x", id)
				}
				seen[id] = true
				if id>>48 != 0xabcd {
					t.Errorf("id %x lost the member prefix", id)
				}
			}
		}()
	}
	wg.Wait()
}
