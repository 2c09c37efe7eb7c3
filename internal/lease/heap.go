package lease

import "time"

// minHeap is a binary min-heap ordered by less. If setIndex is set, it is
// told every item's position as it moves (-1 when it leaves), so that an
// item can be re-ordered or removed in O(log n) without a search. Both
// lease queues below are one.
type minHeap[T any] struct {
	items    []T
	less     func(a, b T) bool
	setIndex func(item T, i int)
}

func (h *minHeap[T]) Len() int { return len(h.items) }

// Peek returns the first item; ok is false when the heap is empty.
func (h *minHeap[T]) Peek() (top T, ok bool) {
	if len(h.items) == 0 {
		return top, false
	}
	return h.items[0], true
}

// Push adds x.
func (h *minHeap[T]) Push(x T) {
	h.items = append(h.items, x)
	i := len(h.items) - 1
	h.moved(i)
	h.up(i)
}

// Pop removes and returns the first item; the heap must not be empty.
func (h *minHeap[T]) Pop() T {
	top := h.items[0]
	h.Remove(0)
	return top
}

// Remove takes out the item at position i.
func (h *minHeap[T]) Remove(i int) {
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	if h.setIndex != nil {
		h.setIndex(h.items[last], -1)
	}
	var zero T
	h.items[last] = zero
	h.items = h.items[:last]
	if i != last {
		h.Fix(i)
	}
}

// Fix restores the order after the item at position i changed.
func (h *minHeap[T]) Fix(i int) {
	if !h.up(i) {
		h.down(i)
	}
}

// Clear empties the heap.
func (h *minHeap[T]) Clear() {
	if h.setIndex != nil {
		for _, x := range h.items {
			h.setIndex(x, -1)
		}
	}
	clear(h.items)
	h.items = h.items[:0]
}

func (h *minHeap[T]) moved(i int) {
	if h.setIndex != nil {
		h.setIndex(h.items[i], i)
	}
}

func (h *minHeap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.moved(i)
	h.moved(j)
}

// up moves item i towards the root; it reports whether it moved.
func (h *minHeap[T]) up(i int) bool {
	start := i
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			break
		}
		h.swap(i, parent)
		i = parent
	}
	return i != start
}

func (h *minHeap[T]) down(i int) {
	n := len(h.items)
	for {
		left := 2*i + 1
		if left >= n {
			return
		}
		smallest := left
		if right := left + 1; right < n && h.less(h.items[right], h.items[left]) {
			smallest = right
		}
		if !h.less(h.items[smallest], h.items[i]) {
			return
		}
		h.swap(i, smallest)
		i = smallest
	}
}

// expiryHeap holds leases ordered by their due time: the next moment the
// expiry loop must look at the lease (its expiry, or a retry time once
// the lease was found expired and handed to a revoke). Each lease holds
// its position (heapIndex, -1 when absent) so a renewal moves it in
// O(log n) instead of searching for it.
//
// Only leases of a primary lessor are in the heap; the loop peeks at the
// top and never scans the whole lease set. The zero value is ready.
type expiryHeap struct{ h minHeap[*leaseState] }

func (e *expiryHeap) heap() *minHeap[*leaseState] {
	if e.h.less == nil {
		e.h.less = func(a, b *leaseState) bool {
			if a.due != b.due {
				return a.due < b.due
			}
			return a.id < b.id // total order: equal deadlines pop in ID order
		}
		e.h.setIndex = func(l *leaseState, i int) { l.heapIndex = i }
	}
	return &e.h
}

func (e *expiryHeap) Len() int { return e.h.Len() }

// Peek returns the lease due first, or nil.
func (e *expiryHeap) Peek() *leaseState {
	l, _ := e.h.Peek()
	return l
}

// Upsert inserts l, or restores the heap order after l.due changed.
func (e *expiryHeap) Upsert(l *leaseState) {
	if l.heapIndex >= 0 {
		e.heap().Fix(l.heapIndex)
		return
	}
	e.heap().Push(l)
}

// Remove takes l out of the heap if it is there.
func (e *expiryHeap) Remove(l *leaseState) {
	if l.heapIndex >= 0 {
		e.heap().Remove(l.heapIndex)
	}
}

// Clear empties the heap.
func (e *expiryHeap) Clear() { e.heap().Clear() }

// checkpointDue is one scheduled checkpoint: at due, the primary records
// lease id's remaining TTL through Raft.
type checkpointDue struct {
	due time.Duration
	id  int64
}

// checkpointQueue holds scheduled checkpoints by due time. A lease may
// appear more than once (a stale entry is skipped when popped), which
// keeps scheduling O(log n) without a position index. The zero value is
// ready.
type checkpointQueue struct{ h minHeap[checkpointDue] }

func (q *checkpointQueue) heap() *minHeap[checkpointDue] {
	if q.h.less == nil {
		q.h.less = func(a, b checkpointDue) bool {
			if a.due != b.due {
				return a.due < b.due
			}
			return a.id < b.id
		}
	}
	return &q.h
}

func (q *checkpointQueue) Len() int { return q.h.Len() }

// Peek returns the earliest checkpoint; ok is false when there is none.
func (q *checkpointQueue) Peek() (checkpointDue, bool) { return q.h.Peek() }

func (q *checkpointQueue) Push(c checkpointDue) { q.heap().Push(c) }

// Pop removes and returns the earliest checkpoint; the queue must not be
// empty.
func (q *checkpointQueue) Pop() checkpointDue { return q.heap().Pop() }

func (q *checkpointQueue) Clear() { q.heap().Clear() }
