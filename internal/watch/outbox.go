package watch

import "sync"

// outboxBlockLen is the number of responses in one outbox block.
const outboxBlockLen = 32

// outbox is a stream's queue of responses: a chain of fixed-size blocks
// taken from and returned to the hub's pool, so that a busy stream queues
// without ever copying its backlog and an idle one holds no buffer.
type outbox struct {
	head, tail *outboxBlock
	first      int // next item to take in head
	last       int // next free slot in tail
	n          int
}

type outboxBlock struct {
	items [outboxBlockLen]queued
	next  *outboxBlock
}

func newBlockPool() *sync.Pool {
	return &sync.Pool{New: func() any { return new(outboxBlock) }}
}

func (o *outbox) len() int { return o.n }

func (o *outbox) push(q queued, pool *sync.Pool) {
	if o.tail == nil || o.last == outboxBlockLen {
		b := pool.Get().(*outboxBlock)
		if o.tail == nil {
			o.head, o.first = b, 0
		} else {
			o.tail.next = b
		}
		o.tail, o.last = b, 0
	}
	o.tail.items[o.last] = q
	o.last++
	o.n++
}

// pop removes the oldest item. The outbox must not be empty.
func (o *outbox) pop(pool *sync.Pool) queued {
	b := o.head
	q := b.items[o.first]
	b.items[o.first] = queued{}
	o.first++
	o.n--
	switch {
	case o.n == 0:
		// Empty: give the block back, whatever its fill.
		o.head, o.tail, o.first, o.last = nil, nil, 0, 0
		pool.Put(b)
	case o.first == outboxBlockLen:
		o.head, o.first = b.next, 0
		b.next = nil
		pool.Put(b)
	}
	return q
}

// reset drops every item and returns the blocks to the pool.
func (o *outbox) reset(pool *sync.Pool) {
	for o.n > 0 {
		o.pop(pool)
	}
}
