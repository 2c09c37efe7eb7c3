package lease

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestRecordEncoding(t *testing.T) {
	cases := []struct {
		name string
		rec  Record
		// want is what etcd 3.6.16's leasepb.Lease.Marshal produces (checked
		// against it).
		want []byte
	}{
		{"id and ttl", Record{ID: 1, TTL: 5}, []byte{0x08, 0x01, 0x10, 0x05}},
		{"with remaining", Record{ID: 0x694d77a0e6d1b00f, TTL: 60, RemainingTTL: 42},
			[]byte{0x08, 0x8f, 0xe0, 0xc6, 0xb6, 0x8e, 0xf4, 0xdd, 0xa6, 0x69, 0x10, 0x3c, 0x18, 0x2a}},
		{"negative id is ten bytes", Record{ID: -1, TTL: 1},
			[]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x10, 0x01}},
		{"zero ttl omitted", Record{ID: 7}, []byte{0x08, 0x07}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := AppendRecord(nil, c.rec)
			if !bytes.Equal(got, c.want) {
				t.Fatalf("encoded % x, want % x", got, c.want)
			}
			back, err := DecodeRecord(got)
			if err != nil || back != c.rec {
				t.Fatalf("decoded %+v, %v; want %+v", back, err, c.rec)
			}
		})
	}
}

func TestDecodeRecordSkipsUnknownFields(t *testing.T) {
	// ID=3, an unknown length-delimited field 9 "xy", TTL=4, unknown fixed64 field 10.
	b := []byte{0x08, 0x03, 0x4a, 0x02, 'x', 'y', 0x10, 0x04, 0x51, 1, 2, 3, 4, 5, 6, 7, 8}
	got, err := DecodeRecord(b)
	if err != nil || got != (Record{ID: 3, TTL: 4}) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestDecodeRecordRejectsMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"truncated varint":        {0x08, 0x80},
		"known field wrong type":  {0x0a, 0x01, 0x00},
		"truncated unknown field": {0x4a, 0x05, 'x'},
		"bad tag":                 {0x80},
		"field number zero":       {0x00, 0x01},
	} {
		if _, err := DecodeRecord(b); !errors.Is(err, errMalformedRecord) {
			t.Errorf("%s: err = %v, want malformed", name, err)
		}
	}
}

func TestDecodeKeyedRecord(t *testing.T) {
	good := AppendRecord(nil, Record{ID: 5, TTL: 10})
	if _, err := decodeKeyedRecord(recordKey(nil, 5), good); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeKeyedRecord(recordKey(nil, 6), good); err == nil {
		t.Error("key naming another lease accepted")
	}
	if _, err := decodeKeyedRecord([]byte{1, 2, 3}, good); err == nil {
		t.Error("short key accepted")
	}
	if _, err := decodeKeyedRecord(recordKey(nil, 0), AppendRecord(nil, Record{TTL: 3})); err == nil {
		t.Error("lease 0 accepted")
	}
}

// FuzzDecodeRecord feeds arbitrary bytes to the record decoder (the bytes
// come from disk and from snapshots sent over the network): it must never
// panic, and whatever it accepts must re-encode to something that decodes
// to the same record.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendRecord(nil, Record{ID: 1, TTL: 5}))
	f.Add(AppendRecord(nil, Record{ID: math.MinInt64, TTL: MaxTTL, RemainingTTL: -3}))
	f.Add([]byte{0x08, 0x03, 0x4a, 0x02, 'x', 'y', 0x10, 0x04})
	f.Add([]byte{0x08, 0x80})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := DecodeRecord(b)
		if err != nil {
			return
		}
		again, err := DecodeRecord(AppendRecord(nil, rec))
		if err != nil || again != rec {
			t.Fatalf("round trip of %+v gave %+v, %v", rec, again, err)
		}
	})
}
