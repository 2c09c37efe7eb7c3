package watch

import "sync"

// outboxBlockLen is the number of responses in one outbox block.
const outboxBlockLen = 32

// outbox is a stream's queue of responses: fixed-size blocks taken from and
// returned to the hub's pool, so that a busy stream queues without ever
// copying its backlog and an idle one holds no buffer.
//
// Every item has a sequence number, its rank among all the items ever
// pushed, by which it can be found again (to merge events into it) until
// it is popped. With items 0..39 pushed and 0..4 popped, for example:
//
//	blocks[head]   items 0..31, first = 5  (0..4 taken, slots cleared)
//	blocks[head+1] items 32..39, last = 8
//	popped = 5, pushed = 40; item 35 is blocks[head+1].items[3]
type outbox struct {
	blocks []*outboxBlock // blocks[head:] hold the queued items, in order
	head   int
	first  int    // next item to take in blocks[head]
	last   int    // next free slot in the last block
	popped uint64 // sequence number of the next item to pop
	pushed uint64 // sequence number of the next item to push
}

type outboxBlock struct {
	items [outboxBlockLen]queued
}

func newBlockPool() *sync.Pool {
	return &sync.Pool{New: func() any { return new(outboxBlock) }}
}

func (o *outbox) len() int { return int(o.pushed - o.popped) }

// push appends q and returns its sequence number.
func (o *outbox) push(q queued, pool *sync.Pool) uint64 {
	if o.head == len(o.blocks) || o.last == outboxBlockLen {
		if o.head > 0 && len(o.blocks) == cap(o.blocks) {
			// Reuse the room the taken blocks left at the front
			// rather than grow the slice.
			n := copy(o.blocks, o.blocks[o.head:])
			clear(o.blocks[n:])
			o.blocks, o.head = o.blocks[:n], 0
		}
		o.blocks = append(o.blocks, pool.Get().(*outboxBlock))
		o.last = 0
	}
	o.blocks[len(o.blocks)-1].items[o.last] = q
	o.last++
	seq := o.pushed
	o.pushed++
	return seq
}

// at returns the queued item with sequence number seq, or nil if it was
// popped already (or never pushed). The pointer is valid until the next
// pop.
func (o *outbox) at(seq uint64) *queued {
	if seq < o.popped || seq >= o.pushed {
		return nil
	}
	off := o.first + int(seq-o.popped)
	return &o.blocks[o.head+off/outboxBlockLen].items[off%outboxBlockLen]
}

// pop removes the oldest item. The outbox must not be empty.
func (o *outbox) pop(pool *sync.Pool) queued {
	b := o.blocks[o.head]
	q := b.items[o.first]
	b.items[o.first] = queued{}
	o.first++
	o.popped++
	switch {
	case o.popped == o.pushed:
		// Empty: give the block back, whatever its fill. (The last
		// block is the head one: push fills a block it takes at once.)
		pool.Put(b)
		o.blocks[o.head] = nil
		o.blocks, o.head, o.first, o.last = o.blocks[:0], 0, 0, 0
	case o.first == outboxBlockLen:
		pool.Put(b)
		o.blocks[o.head] = nil
		o.head, o.first = o.head+1, 0
	}
	return q
}

// reset drops every item and returns the blocks to the pool.
func (o *outbox) reset(pool *sync.Pool) {
	for o.len() > 0 {
		o.pop(pool)
	}
}
