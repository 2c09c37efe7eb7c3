package kvstoretest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// kvsBytes is the encoded size of the key-values of a RangeResponse.
func kvsBytes(resp *pb.RangeResponse) int64 {
	n := (&pb.RangeResponse{Kvs: resp.Kvs}).Size()
	return int64(n)
}

// testResponseBounds: a read whose key-values are over MaxResponseBytes
// fails with their full size; one over MaxResponseMemory stops; what is
// charged is what the response carries (limit, keys_only, filters).
func testResponseBounds(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	const keys, valueSize = 40, 1000
	// The same history in a store without bounds gives the sizes.
	free := open(t, newBackend(t), kvstore.Options{})
	fill := func(s *kvstore.Store) {
		t.Helper()
		for i := range keys {
			if _, err := Exec(s, put(fmt.Sprintf("k%02d", i), strings.Repeat("v", valueSize))); err != nil {
				t.Fatal(err)
			}
		}
		// A second version of the first keys, so that a read at an
		// older revision reads records, not the key index.
		for i := range 5 {
			if _, err := Exec(s, put(fmt.Sprintf("k%02d", i), "w")); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill(free)
	fullResp, err := free.Range(span("k", "l"))
	if err != nil {
		t.Fatal(err)
	}
	full := kvsBytes(fullResp)
	limit := full / 2
	bounded := open(t, newBackend(t), kvstore.Options{MaxResponseBytes: limit})
	fill(bounded)

	tooLarge := func(t *testing.T, err error, wantBytes, wantLimit int64, memory bool) {
		t.Helper()
		var tl *kvstore.ResponseTooLargeError
		if !errors.As(err, &tl) {
			t.Fatalf("got %v, want a ResponseTooLargeError", err)
		}
		if tl.Memory != memory || tl.Limit != wantLimit || (wantBytes > 0 && tl.KVBytes != wantBytes) {
			t.Fatalf("got %+v, want %d bytes over %d (memory %v)", *tl, wantBytes, wantLimit, memory)
		}
	}
	t.Run("OverSendBoundGivesFullSize", func(t *testing.T) {
		_, err := bounded.Range(span("k", "l"))
		tooLarge(t, err, full, limit, false)
		// At an older revision too (records, not the key index).
		old, err := free.Range(at(span("k", "l"), keys+1))
		if err != nil {
			t.Fatal(err)
		}
		_, err = bounded.Range(at(span("k", "l"), keys+1))
		tooLarge(t, err, kvsBytes(old), limit, false)
	})
	// Requests whose responses fit, answered exactly as without bound.
	fits := map[string]*pb.RangeRequest{
		"Limit":             {Key: []byte("k"), RangeEnd: []byte("l"), Limit: keys / 4},
		"KeysOnly":          {Key: []byte("k"), RangeEnd: []byte("l"), KeysOnly: true},
		"KeysOnlyOlderRev":  {Key: []byte("k"), RangeEnd: []byte("l"), KeysOnly: true, Revision: keys + 2},
		"CountOnly":         {Key: []byte("k"), RangeEnd: []byte("l"), CountOnly: true},
		"FilterLeavesFew":   {Key: []byte("k"), RangeEnd: []byte("l"), MaxModRevision: 5},
		"SortDescendLimit":  {Key: []byte("k"), RangeEnd: []byte("l"), SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_MOD, Limit: 3},
		"SortCreateKeyOnly": {Key: []byte("k"), RangeEnd: []byte("l"), SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_CREATE, KeysOnly: true},
	}
	for name, req := range fits {
		t.Run("Fits"+name, func(t *testing.T) {
			want, err := free.Range(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := bounded.Range(req)
			if err != nil {
				t.Fatalf("bounded store: %v", err)
			}
			if same, diff := SameResponse(got, want); !same {
				t.Fatal(diff)
			}
		})
	}
	t.Run("SortedOverBoundAfterFilter", func(t *testing.T) {
		req := &pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l"), SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_MOD, MinModRevision: 2}
		want, err := free.Range(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = bounded.Range(req)
		tooLarge(t, err, kvsBytes(want), limit, false)
	})
	t.Run("ReadTxnSharesTheBound", func(t *testing.T) {
		half := &pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("k2")}
		r, err := free.Range(half)
		if err != nil {
			t.Fatal(err)
		}
		if kvsBytes(r) > limit || 2*kvsBytes(r) <= limit {
			t.Fatalf("test setup: %d bytes for a bound of %d", kvsBytes(r), limit)
		}
		if _, err := bounded.ReadTxn(txn(nil, ops(OpRange(half)), nil)); err != nil {
			t.Fatalf("one range within the bound: %v", err)
		}
		_, err = bounded.ReadTxn(txn(nil, ops(OpRange(half), OpRange(half)), nil))
		tooLarge(t, err, 2*kvsBytes(r), limit, false)
	})
	t.Run("MemoryBoundStops", func(t *testing.T) {
		memLimit := int64(10 * valueSize)
		s := open(t, newBackend(t), kvstore.Options{MaxResponseMemory: memLimit})
		fill(s)
		_, err := s.Range(span("k", "l"))
		tooLarge(t, err, 0, memLimit, true)
		if _, err := s.Range(&pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l"), Limit: 5}); err != nil {
			t.Fatalf("5 values within a bound of 10: %v", err)
		}
	})
	t.Run("LargeResponsesCountedBeforeLoaded", func(t *testing.T) {
		// Past 64 MiB of values a read counts the rest before loading it:
		// the same answers, in two walks.
		const big, bigSize = 70, 1 << 20
		fillBig := func(s *kvstore.Store) {
			t.Helper()
			for i := range big {
				if _, err := Exec(s, put(fmt.Sprintf("b%02d", i), strings.Repeat("v", bigSize))); err != nil {
					t.Fatal(err)
				}
			}
		}
		freeBig := open(t, newBackend(t), kvstore.Options{})
		fillBig(freeBig)
		want, err := freeBig.Range(span("b", "c"))
		if err != nil {
			t.Fatal(err)
		}
		size := kvsBytes(want)
		fits := open(t, newBackend(t), kvstore.Options{MaxResponseBytes: size + 10})
		fillBig(fits)
		sorted := &pb.RangeRequest{Key: []byte("b"), RangeEnd: []byte("c"), SortOrder: pb.RangeRequest_DESCEND}
		wantSorted, err := freeBig.Range(sorted)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			req  *pb.RangeRequest
			want *pb.RangeResponse
		}{{span("b", "c"), want}, {sorted, wantSorted}} {
			got, err := fits.Range(tc.req)
			if err != nil {
				t.Fatalf("%v within the bound: %v", tc.req, err)
			}
			if same, diff := SameResponse(got, tc.want); !same {
				t.Fatal(diff)
			}
		}
		over := open(t, newBackend(t), kvstore.Options{MaxResponseBytes: size - 10})
		fillBig(over)
		_, err = over.Range(span("b", "c"))
		tooLarge(t, err, size, size-10, false)
		_, err = over.Range(sorted)
		tooLarge(t, err, size, size-10, false)
	})
	t.Run("WriteTxnRangesAreNotBounded", func(t *testing.T) {
		// Apply must not depend on anything but the log.
		resp, err := Exec(bounded, txn(nil, ops(OpRange(span("k", "l")), OpPut(put("x", "1"))), nil))
		if err != nil {
			t.Fatalf("write txn with a large range: %v", err)
		}
		if got := resp.(*pb.TxnResponse).Responses[0].GetResponseRange(); int64(len(got.Kvs)) != keys {
			t.Fatalf("write txn's range: %d keys", len(got.Kvs))
		}
	})
}
