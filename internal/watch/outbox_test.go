package watch

import (
	"math/rand/v2"
	"testing"
)

// TestOutboxFIFO pushes and pops in random bursts across block
// boundaries and checks first-in first-out order and the count.
func TestOutboxFIFO(t *testing.T) {
	pool := newBlockPool()
	var o outbox
	r := rand.New(rand.NewPCG(3, 4))
	next, want := int64(0), int64(0)
	for range 2000 {
		for range r.IntN(3 * outboxBlockLen) {
			o.push(queued{resp: Response{WatchID: next}}, pool)
			next++
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
	}
	o.reset(pool)
	if o.len() != 0 || o.head != nil || o.tail != nil {
		t.Fatal("reset left items behind")
	}
}
