package lease

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// checkHeap verifies the heap property and the stored positions.
func checkHeap(t *testing.T, h *expiryHeap) {
	t.Helper()
	for i, ls := range h.h.items {
		if ls.heapIndex != i {
			t.Fatalf("item %d (lease %d) records index %d", i, ls.id, ls.heapIndex)
		}
		if i > 0 && h.h.less(ls, h.h.items[(i-1)/2]) {
			t.Fatalf("item %d (due %v) is before its parent (due %v)", i, ls.due, h.h.items[(i-1)/2].due)
		}
	}
}

func TestExpiryHeapRandomOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h expiryHeap
	all := make([]*leaseState, 200)
	for i := range all {
		all[i] = &leaseState{id: int64(i + 1), heapIndex: -1}
	}
	for step := range 20000 {
		ls := all[rng.IntN(len(all))]
		switch rng.IntN(3) {
		case 0, 1: // insert or move (a renewal or a retry)
			ls.due = time.Duration(rng.IntN(1000)) * time.Millisecond
			h.Upsert(ls)
		case 2:
			h.Remove(ls)
			if ls.heapIndex != -1 {
				t.Fatalf("step %d: removed lease keeps index %d", step, ls.heapIndex)
			}
		}
		checkHeap(t, &h)
	}
	// Draining by Peek+Remove yields (due, id) order.
	var got []*leaseState
	for h.Len() > 0 {
		ls := h.Peek()
		h.Remove(ls)
		got = append(got, ls)
	}
	if !slices.IsSortedFunc(got, func(a, b *leaseState) int {
		if a.due != b.due {
			return int(a.due - b.due)
		}
		return int(a.id - b.id)
	}) {
		t.Fatal("heap did not drain in (due, id) order")
	}
	if h.Peek() != nil {
		t.Fatal("Peek on an empty heap returned a lease")
	}
}

func TestExpiryHeapClear(t *testing.T) {
	var h expiryHeap
	a, b := &leaseState{id: 1, heapIndex: -1}, &leaseState{id: 2, heapIndex: -1}
	h.Upsert(a)
	h.Upsert(b)
	h.Clear()
	if h.Len() != 0 || a.heapIndex != -1 || b.heapIndex != -1 {
		t.Fatalf("after Clear: len %d, indexes %d %d", h.Len(), a.heapIndex, b.heapIndex)
	}
	h.Upsert(b)
	if h.Peek() != b {
		t.Fatal("heap unusable after Clear")
	}
}

func TestCheckpointQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var q checkpointQueue
	var want []checkpointDue
	for range 5000 {
		c := checkpointDue{due: time.Duration(rng.IntN(100)), id: int64(rng.IntN(50))}
		q.Push(c)
		want = append(want, c)
	}
	slices.SortFunc(want, func(a, b checkpointDue) int {
		if a.due != b.due {
			return int(a.due - b.due)
		}
		return int(a.id - b.id)
	})
	for i, w := range want {
		if top, _ := q.Peek(); top != w {
			t.Fatalf("pop %d: peek %v, want %v", i, top, w)
		}
		if got := q.Pop(); got != w {
			t.Fatalf("pop %d: got %v, want %v", i, got, w)
		}
	}
	if _, ok := q.Peek(); ok {
		t.Fatal("queue not empty after popping everything")
	}
}
