package kvstore

import (
	"fmt"
	"math"
	"math/bits"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A read's response is bounded in bytes (Options.MaxResponseBytes): the
// store counts the encoded size of the key-values it puts into a Range or
// read-only Txn response as it loads them, and once the count passes the
// bound it stops keeping them and only goes on counting, so that a range
// over gigabytes is refused with its true size without the member ever
// holding it. etcd builds the whole response and then fails to send it
// (gRPC's "trying to send message larger than max"); the refusal here is
// the same one, given before the memory is spent.
//
// What is counted is what the response will carry: with a limit, only the
// keys sent; with keys_only, no values. The part that is not counted, the
// header, the count and the more flag, is at most ResponseOverheadBytes.
// A range that sorts by value holds every value before sorting, and that
// is what it is charged for.

// deferAboveBytes is how much of a response's values a read keeps before
// it knows the whole response fits: past it, the sizes of the rest are
// counted first, and loaded only if within the bounds. A response over the
// bound is so refused having held no more than this, not the bound itself
// (2 GiB by default); one within it costs a second walk of its records
// past this point.
const deferAboveBytes = 64 << 20

// ResponseOverheadBytes bounds the encoded size of a RangeResponse without
// its key-values: a header of four varints, the count and the more flag.
const ResponseOverheadBytes = 64

// ResponseTooLargeError refuses a read whose response is over one of the
// store's bounds. With Memory false the response's key-values would
// encode to KVBytes bytes (all of them counted, not only up to the bound)
// and Limit is Options.MaxResponseBytes. With Memory true, holding them
// would take more than Limit = Options.MaxResponseMemory, and KVBytes is
// what was counted when the read stopped: the response is larger still.
type ResponseTooLargeError struct {
	KVBytes int64
	Limit   int64
	Memory  bool
}

func (e *ResponseTooLargeError) Error() string {
	if e.Memory {
		return fmt.Sprintf("kvstore: response over the %d-byte memory bound (stopped at %d bytes of key-values)", e.Limit, e.KVBytes)
	}
	return fmt.Sprintf("kvstore: response of %d bytes of key-values is over the %d-byte bound", e.KVBytes, e.Limit)
}

// heldOverheadBytes is what a key-value costs in memory besides its
// encoded bytes while a response holds it: the decoded mvccpb.KeyValue
// (80 bytes) and the response's pointer to it.
const heldOverheadBytes = 88

// responseBudget counts the bytes of the key-values of one response; the
// read-only txn shares one across its ranges. A nil budget counts nothing
// (the apply side: a write txn's ranges are not refused, since apply must
// not depend on anything but the log).
type responseBudget struct {
	sendLimit int64 // bound on encoded key-values; > 0
	memLimit  int64 // bound on the memory they take; 0: none
	sent      int64 // encoded bytes counted
	held      int64 // memory of the key-values kept
}

func newResponseBudget(sendLimit, memLimit int64) *responseBudget {
	if sendLimit <= 0 && memLimit <= 0 {
		return nil
	}
	if sendLimit <= 0 {
		sendLimit = math.MaxInt64
	}
	return &responseBudget{sendLimit: sendLimit, memLimit: max(memLimit, 0)}
}

// fieldBytes is the size of a length-delimited field of n bytes in a
// message (tag, length, payload): how much one KeyValue of encoded size n
// adds to the repeated kvs field of a RangeResponse.
func fieldBytes(n int) int64 { return int64(1 + uvarintLen(uint64(n)) + n) }

func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// charge counts a key-value of encoded size n and reports whether the
// response is still within both bounds. Once over, the caller keeps no
// more key-values; it only goes on charging, with count, while the
// response is over the size bound alone, to learn the full size.
func (b *responseBudget) charge(n int) bool {
	if b == nil {
		return true
	}
	b.sent += fieldBytes(n)
	if !b.over() {
		b.held += int64(n) + heldOverheadBytes
	}
	return !b.over()
}

// count charges a key-value that is not kept (yet).
func (b *responseBudget) count(n int) { b.sent += fieldBytes(n) }

// hold charges the memory of a key-value whose size count already
// charged, and reports whether the response is within the memory bound.
func (b *responseBudget) hold(n int) bool {
	if b == nil {
		return true
	}
	b.held += int64(n) + heldOverheadBytes
	return !b.overMemory()
}

// pastDeferral reports whether the values kept so far pass
// deferAboveBytes: the rest is to be counted before it is loaded.
func (b *responseBudget) pastDeferral() bool { return b != nil && b.sent > deferAboveBytes }

// over reports whether a bound is passed.
func (b *responseBudget) over() bool {
	return b != nil && (b.sent > b.sendLimit || b.overMemory())
}

// overMemory reports whether the memory bound is passed: the read stops
// at once, without counting the rest.
func (b *responseBudget) overMemory() bool { return b != nil && b.memLimit > 0 && b.held > b.memLimit }

func (b *responseBudget) err() error {
	if b.overMemory() {
		return &ResponseTooLargeError{KVBytes: b.sent, Limit: b.memLimit, Memory: true}
	}
	return &ResponseTooLargeError{KVBytes: b.sent, Limit: b.sendLimit}
}

// chargeKVs counts key-values already built (keys_only responses, whose
// metadata comes from the key index) and fails if they are over a bound.
func (b *responseBudget) chargeKVs(kvs []mvccpb.KeyValue) error {
	if b == nil {
		return nil
	}
	for i := range kvs {
		b.charge(kvs[i].Size())
	}
	if b.over() {
		return b.err()
	}
	return nil
}
