package forward

import (
	"bytes"
	"slices"
	"testing"
)

func TestRenewBatchCodec(t *testing.T) {
	ids := []int64{7, 9, -1, 1 << 62}
	got, err := DecodeRenewBatch(EncodeRenewBatch(ids))
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("round trip of %v: %v, %v", ids, got, err)
	}
	if got, err := DecodeRenewBatch(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %v, %v", got, err)
	}
	for _, bad := range [][]byte{{5, 8}, {0x80}, {2, 0xff, 0xff}} {
		if _, err := DecodeRenewBatch(bad); err == nil {
			t.Errorf("DecodeRenewBatch(%x) accepted", bad)
		}
	}
	// The example in renew.go's comment.
	if want := []byte{2, 8, 7, 2, 8, 9}; !bytes.Equal(EncodeRenewBatch([]int64{7, 9}), want) {
		t.Errorf("EncodeRenewBatch(7, 9) = %x, want %x", EncodeRenewBatch([]int64{7, 9}), want)
	}
}

// FuzzDecodeRenewBatch: batches arrive from the network; decoding never
// panics, and what decodes encodes back to a batch with the same IDs.
func FuzzDecodeRenewBatch(f *testing.F) {
	f.Add(EncodeRenewBatch([]int64{1, 2, 3}))
	f.Add([]byte{})
	f.Add([]byte{0x80, 0x80})
	f.Add([]byte{3, 8, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		ids, err := DecodeRenewBatch(data)
		if err != nil {
			return
		}
		again, err := DecodeRenewBatch(EncodeRenewBatch(ids))
		if err != nil || !slices.Equal(again, ids) {
			t.Fatalf("re-encoded %v decodes to %v, %v", ids, again, err)
		}
	})
}
