package kvstore

import (
	"fmt"
	"testing"
)

// TestChunkReadStopsAtLimit: a chunk read walks only as many live keys as
// it may take, plus the one that tells more follow, and does not go on
// counting the rest of the range as a unary range does; it resumes after
// the last key it walked; the byte bound stops it too.
func TestChunkReadStopsAtLimit(t *testing.T) {
	w := newIndexWriter()
	const keys = 100
	for i := range keys {
		w.put(fmt.Appendf(nil, "k%03d", i), revision{main: int64(i + 2)}, 0)
	}
	w.tombstone(w.lookup([]byte("k003")), revision{main: keys + 2})
	rev := int64(keys + 2)
	// Keys-only reads take live keys' metadata from the index: no values
	// are needed.
	r := kvReader{index: w.snapshot()}
	walked := 0
	counting := kvReader{index: r.index}
	unary, err := counting.rangeKeys([]byte("k"), []byte("l"), rev, rangeOptions{limit: 5, meta: true, charge: -1})
	if err != nil {
		t.Fatal(err)
	}
	if unary.count != keys-1 {
		t.Fatalf("unary count %d, want %d", unary.count, keys-1)
	}
	from := []byte("k")
	for {
		rr, err := r.rangeKeys(from, []byte("l"), rev, rangeOptions{limit: 5, meta: true, charge: -1, chunk: true})
		if err != nil {
			t.Fatal(err)
		}
		if rr.count != len(rr.kvs) || rr.count > 5 {
			t.Fatalf("chunk from %q: counted %d, took %d; want at most 5, all taken", from, rr.count, len(rr.kvs))
		}
		if rr.stopped != (rr.count == 5 && walked+5 < keys-1) {
			t.Fatalf("chunk from %q: stopped %v after %d keys (%d before)", from, rr.stopped, rr.count, walked)
		}
		for _, kv := range rr.kvs {
			if string(kv.Key) == "k003" {
				t.Fatal("deleted key k003 taken")
			}
		}
		walked += rr.count
		if !rr.stopped {
			break
		}
		if string(rr.last) != string(rr.kvs[len(rr.kvs)-1].Key) {
			t.Fatalf("last %q, want %q", rr.last, rr.kvs[len(rr.kvs)-1].Key)
		}
		from = append(append([]byte(nil), rr.last...), 0)
	}
	if walked != keys-1 {
		t.Fatalf("chunks walked %d keys, want %d", walked, keys-1)
	}
	// The byte bound: every key-value here encodes to the same size.
	one, err := r.rangeKeys([]byte("k000"), nil, rev, rangeOptions{meta: true, charge: -1})
	if err != nil {
		t.Fatal(err)
	}
	size := one.kvs[0].Size()
	rr, err := r.rangeKeys([]byte("k"), []byte("l"), rev, rangeOptions{limit: 50, meta: true, charge: -1, chunk: true, stopBytes: 3*size - 1})
	if err != nil {
		t.Fatal(err)
	}
	if rr.count != 3 || !rr.stopped || rr.bytes != 3*size {
		t.Fatalf("byte-bound chunk: %d keys, %d bytes, stopped %v; want 3 keys of %d bytes, stopped", rr.count, rr.bytes, rr.stopped, size)
	}
}
