package rocksdb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// encodeImage builds an image of kvs as given, without checking order, so
// tests can craft well-checksummed images with bad content.
func encodeImage(t testing.TB, kvs []kv) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := newImageEncoder(&buf)
	for _, p := range kvs {
		if err := e.record([]byte(p.key), []byte(p.value)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.finish(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodeAll(data []byte) ([]kv, error) {
	var out []kv
	n, err := decodeImage(bytes.NewReader(data), func(k, v []byte) error {
		out = append(out, kv{string(k), string(v)})
		return nil
	})
	if err == nil && n != uint64(len(out)) {
		return nil, errors.New("decodeImage miscounted")
	}
	return out, err
}

// TestImageLayout pins the format byte for byte (the example in doc.go).
func TestImageLayout(t *testing.T) {
	got := encodeImage(t, []kv{{"a", "xy"}, {"b", ""}})
	want := []byte("MSROCKS\x00\x00\x01" +
		"\x01\x01a\x02xy" +
		"\x01\x01b\x00" +
		"\x02\x00\x00\x00\x00\x00\x00\x00\x02")
	want = binary.BigEndian.AppendUint32(want, crc32.Checksum(want, castagnoli))
	if !bytes.Equal(got, want) {
		t.Fatalf("image\n got %q\nwant %q", got, want)
	}
	kvs, err := decodeAll(got)
	if err != nil {
		t.Fatal(err)
	}
	mustEqualKVs(t, "decoded", kvs, []kv{{"a", "xy"}, {"b", ""}})
}

func TestImageLargeValue(t *testing.T) {
	big := string(bytes.Repeat([]byte("0123456789abcdef"), 3*readChunk/16+7))
	kvs, err := decodeAll(encodeImage(t, []kv{{"k", big}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 1 || kvs[0].value != big {
		t.Fatal("large value did not round-trip")
	}
}

func TestImageRejects(t *testing.T) {
	valid := encodeImage(t, []kv{{"a", "1"}})
	withCRC := func(body []byte) []byte {
		return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	}
	header := []byte("MSROCKS\x00\x00\x01")
	cases := map[string][]byte{
		"huge key length": withCRC(append(bytes.Clone(header), 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f)),
		"varint overflow": withCRC(append(bytes.Clone(header), 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)),
		"padded varint":   withCRC(append(bytes.Clone(header), 0x01, 0x81, 0x00, 'a', 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, 1)),
		"lying length":    withCRC(append(bytes.Clone(header), 0x01, 0xff, 0xff, 0xff, 0x03, 'a')),
		"crc of nothing":  append(bytes.Clone(valid[:len(valid)-4]), 0, 0, 0, 0),
	}
	for name, data := range cases {
		if _, err := decodeAll(data); !errors.Is(err, ErrBadImage) {
			t.Errorf("%s: err = %v, want ErrBadImage", name, err)
		}
	}
}

func FuzzDecodeImage(f *testing.F) {
	for _, seed := range imageSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kvs, err := decodeAll(data)
		if err != nil {
			if !errors.Is(err, ErrBadImage) {
				t.Fatalf("error from in-memory input is not ErrBadImage: %v", err)
			}
			return
		}
		// The format is canonical: an accepted image re-encodes to itself.
		if again := encodeImage(t, kvs); !bytes.Equal(again, data) {
			t.Fatalf("accepted image does not re-encode to itself:\n in %q\nout %q", data, again)
		}
	})
}

// FuzzRestore feeds inputs to a real backend: a rejected input changes
// nothing, an accepted one becomes the exact content.
func FuzzRestore(f *testing.F) {
	for _, seed := range imageSeeds(f) {
		f.Add(seed)
	}
	b := openTest(f, f.TempDir())
	f.Cleanup(func() { b.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		before := contents(t, b)
		err := b.Restore(bytes.NewReader(data))
		after := contents(t, b)
		if err != nil {
			mustEqualKVs(t, "content after rejected Restore", after, before)
			return
		}
		want, derr := decodeAll(data)
		if derr != nil {
			t.Fatalf("Restore accepted an image decodeImage rejects: %v", derr)
		}
		mustEqualKVs(t, "content after Restore", after, want)
	})
}

func imageSeeds(f *testing.F) [][]byte {
	valid := encodeImage(f, sortedFixture)
	flipped := bytes.Clone(valid)
	flipped[20] ^= 1
	return [][]byte{
		nil,
		encodeImage(f, nil),
		encodeImage(f, []kv{{"a", "xy"}, {"b", ""}}),
		valid,
		valid[:len(valid)-3],
		flipped,
		encodeImage(f, []kv{{"b", "1"}, {"a", "1"}}),
		// Found by FuzzRestore: a repeated empty key slipped past the order
		// check and crashed RocksDB's SST writer on an assertion.
		encodeImage(f, []kv{{"", "1"}, {"", "2"}}),
	}
}
