package server

import (
	"sync"
	"testing"
	"time"
)

func TestWaitRegistryDeliversOnce(t *testing.T) {
	w := newWaitRegistry()
	ch := w.Register(7)
	w.Trigger(7, applyResult{resp: "ok"})
	w.Trigger(7, applyResult{resp: "again"}) // no waiter any more: no-op
	select {
	case r := <-ch:
		if r.resp != "ok" {
			t.Fatalf("got %v", r.resp)
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
	w.Trigger(1, applyResult{resp: "late"})
	w.Trigger(12345, applyResult{}) // replayed entry nobody waits for
	select {
	case r := <-ch:
		t.Fatalf("cancelled waiter got %v", r)
	default:
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
