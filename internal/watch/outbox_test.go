package watch

import (
	"math/rand/v2"
	"testing"
)

// TestOutboxFIFO pushes and pops in random bursts across block
// boundaries and checks first-in first-out order, the count, and that
// every queued item (and only those) can be found by its sequence number.
func TestOutboxFIFO(t *testing.T) {
	pool := newBlockPool()
	var o outbox
	r := rand.New(rand.NewPCG(3, 4))
	next, want := int64(0), int64(0)
	for range 2000 {
		for range r.IntN(3 * outboxBlockLen) {
			if seq := o.push(queued{resp: Response{WatchID: next}}, pool); seq != uint64(next) {
				t.Fatalf("pushed item %d got sequence number %d", next, seq)
			}
			next++
		}
		for seq := uint64(max(0, want-outboxBlockLen)); seq < uint64(next); seq++ {
			q := o.at(seq)
			switch {
			case int64(seq) < want && q != nil:
				t.Fatalf("item %d was popped but at returns it", seq)
			case int64(seq) >= want && (q == nil || q.resp.WatchID != int64(seq)):
				t.Fatalf("at(%d) = %v", seq, q)
			}
		}
		if o.at(uint64(next)) != nil {
			t.Fatal("at returned an item not pushed yet")
		}
		for n := r.IntN(3*outboxBlockLen + 1); n > 0 && o.len() > 0; n-- {
			if got := o.pop(pool).resp.WatchID; got != want {
				t.Fatalf("popped %d, want %d", got, want)
			}
			want++
		}
		if o.len() != int(next-want) {
			t.Fatalf("len %d, want %d", o.len(), next-want)
		}
		if held := len(o.blocks) - o.head; held > o.len()/outboxBlockLen+2 {
			t.Fatalf("%d items held in %d blocks", o.len(), held)
		}
	}
	o.reset(pool)
	if o.len() != 0 || len(o.blocks) != 0 {
		t.Fatal("reset left items behind")
	}
}
