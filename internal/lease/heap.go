package lease

import "time"

// expiryHeap is a binary min-heap of leases ordered by their due time: the
// next moment the expiry loop must look at the lease (its expiry, or a
// retry time once the lease was found expired and handed to a revoke).
// Each lease holds its position (heapIndex, -1 when absent) so a renewal
// moves it in O(log n) instead of searching for it.
//
// Only leases of a primary lessor are in the heap; the loop peeks at the
// top and never scans the whole lease set.
type expiryHeap struct {
	items []*leaseState
}

func (h *expiryHeap) Len() int { return len(h.items) }

// Peek returns the lease due first, or nil.
func (h *expiryHeap) Peek() *leaseState {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

// Upsert inserts l, or restores the heap order after l.due changed.
func (h *expiryHeap) Upsert(l *leaseState) {
	if l.heapIndex >= 0 {
		if !h.up(l.heapIndex) {
			h.down(l.heapIndex)
		}
		return
	}
	l.heapIndex = len(h.items)
	h.items = append(h.items, l)
	h.up(l.heapIndex)
}

// Remove takes l out of the heap if it is there.
func (h *expiryHeap) Remove(l *leaseState) {
	i := l.heapIndex
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	l.heapIndex = -1
	if i != last {
		if !h.up(i) {
			h.down(i)
		}
	}
}

// Clear empties the heap.
func (h *expiryHeap) Clear() {
	for _, l := range h.items {
		l.heapIndex = -1
	}
	clear(h.items)
	h.items = h.items[:0]
}

func (h *expiryHeap) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.due != b.due {
		return a.due < b.due
	}
	return a.id < b.id // total order: equal deadlines pop in ID order
}

func (h *expiryHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].heapIndex = i
	h.items[j].heapIndex = j
}

// up moves item i towards the root; it reports whether it moved.
func (h *expiryHeap) up(i int) bool {
	start := i
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h.swap(i, parent)
		i = parent
	}
	return i != start
}

func (h *expiryHeap) down(i int) {
	n := len(h.items)
	for {
		left := 2*i + 1
		if left >= n {
			return
		}
		smallest := left
		if right := left + 1; right < n && h.less(right, left) {
			smallest = right
		}
		if !h.less(smallest, i) {
			return
		}
		h.swap(i, smallest)
		i = smallest
	}
}

// checkpointDue is one scheduled checkpoint: at due, the primary records
// lease id's remaining TTL through Raft.
type checkpointDue struct {
	due time.Duration
	id  int64
}

// checkpointQueue is a binary min-heap of scheduled checkpoints by due time.
// A lease may appear more than once (a stale entry is skipped when popped),
// which keeps scheduling O(log n) without a position index.
type checkpointQueue struct {
	items []checkpointDue
}

func (q *checkpointQueue) Len() int { return len(q.items) }

// Peek returns the earliest checkpoint; ok is false when there is none.
func (q *checkpointQueue) Peek() (c checkpointDue, ok bool) {
	if len(q.items) == 0 {
		return checkpointDue{}, false
	}
	return q.items[0], true
}

func (q *checkpointQueue) Push(c checkpointDue) {
	q.items = append(q.items, c)
	i := len(q.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.items[i], q.items[parent] = q.items[parent], q.items[i]
		i = parent
	}
}

// Pop removes and returns the earliest checkpoint; the queue must not be
// empty.
func (q *checkpointQueue) Pop() checkpointDue {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items = q.items[:last]
	n, i := last, 0
	for {
		left := 2*i + 1
		if left >= n {
			break
		}
		smallest := left
		if right := left + 1; right < n && q.less(right, left) {
			smallest = right
		}
		if !q.less(smallest, i) {
			break
		}
		q.items[i], q.items[smallest] = q.items[smallest], q.items[i]
		i = smallest
	}
	return top
}

func (q *checkpointQueue) Clear() { q.items = q.items[:0] }

func (q *checkpointQueue) less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.due != b.due {
		return a.due < b.due
	}
	return a.id < b.id
}
