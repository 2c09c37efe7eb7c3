package wait

import (
	"testing"
	"time"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/statemachine"
)

func TestWaitRegistryDeliversOnce(t *testing.T) {
	w := New()
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
	w := New()
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
// answered ErrExpired, and that the expiry loop does it on its own
// and answers every wait, and every later one, with membererr.ErrStopped once
// stopped.
func TestWaitRegistryExpires(t *testing.T) {
	w := New()
	now := time.Now()
	past := w.RegisterUntil(1, now.Add(-time.Millisecond))
	future := w.RegisterUntil(2, now.Add(time.Hour))
	untimed := w.Register(3)
	w.expire(now)
	if r := <-past; r.Err != ErrExpired {
		t.Fatalf("past deadline: %v, want ErrExpired", r.Err)
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
		w.ExpireLoop(stop, nil)
	}()
	soon := w.RegisterUntil(4, time.Now().Add(expiryInterval))
	select {
	case r := <-soon:
		if r.Err != ErrExpired {
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
			if r.Err != membererr.ErrStopped {
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
