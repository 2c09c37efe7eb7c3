package kvimage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"testing"
)

var testFormat = Format{Name: "test image", Magic: "MSROCKS\x00", Version: 1}

type kv struct{ key, value string }

// encode builds an image of kvs as given, without checking order, so
// tests can craft well-checksummed images with bad content.
func encode(t testing.TB, kvs []kv) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := NewEncoder(&buf, testFormat)
	for _, p := range kvs {
		if err := e.Record([]byte(p.key), []byte(p.value)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Finish(); err != nil {
		t.Fatal(err)
	}
	if e.Written() != int64(buf.Len()) {
		t.Fatalf("Written %d, buffer holds %d", e.Written(), buf.Len())
	}
	return buf.Bytes()
}

func decodeAll(data []byte) ([]kv, error) {
	var out []kv
	n, err := Decode(bytes.NewReader(data), testFormat, func(k, v []byte) error {
		out = append(out, kv{string(k), string(v)})
		return nil
	})
	if err == nil && n != uint64(len(out)) {
		return nil, errors.New("Decode miscounted")
	}
	return out, err
}

// TestLayout pins the format byte for byte (the example in doc.go).
func TestLayout(t *testing.T) {
	got := encode(t, []kv{{"a", "xy"}, {"b", ""}})
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
	if !slices.Equal(kvs, []kv{{"a", "xy"}, {"b", ""}}) {
		t.Fatalf("decoded %q", kvs)
	}
}

func TestLargeValue(t *testing.T) {
	big := string(bytes.Repeat([]byte("0123456789abcdef"), 3*readChunk/16+7))
	kvs, err := decodeAll(encode(t, []kv{{"k", big}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 1 || kvs[0].value != big {
		t.Fatal("large value did not round-trip")
	}
}

func TestRejects(t *testing.T) {
	valid := encode(t, []kv{{"a", "1"}})
	withCRC := func(body []byte) []byte {
		return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	}
	header := []byte("MSROCKS\x00\x00\x01")
	other := bytes.Clone(valid)
	copy(other, "MSMEMSNP")
	cases := map[string][]byte{
		"other magic":     withCRC(other[:len(other)-4]),
		"other version":   withCRC(append([]byte("MSROCKS\x00\x00\x02"), valid[10:len(valid)-4]...)),
		"huge key length": withCRC(append(bytes.Clone(header), 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f)),
		"varint overflow": withCRC(append(bytes.Clone(header), 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)),
		"padded varint":   withCRC(append(bytes.Clone(header), 0x01, 0x81, 0x00, 'a', 0x00, 0x02, 0, 0, 0, 0, 0, 0, 0, 1)),
		"lying length":    withCRC(append(bytes.Clone(header), 0x01, 0xff, 0xff, 0xff, 0x03, 'a')),
		"crc of nothing":  append(bytes.Clone(valid[:len(valid)-4]), 0, 0, 0, 0),
		"repeated key":    encode(t, []kv{{"", "1"}, {"", "2"}}),
		"keys descending": encode(t, []kv{{"b", "1"}, {"a", "1"}}),
		"trailing byte":   append(bytes.Clone(valid), 0),
		"empty":           nil,
	}
	for name, data := range cases {
		if _, err := decodeAll(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
	for n := range valid {
		if _, err := decodeAll(valid[:n]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("cut at %d: err = %v, want ErrCorrupt", n, err)
		}
	}
}

// TestReaderErrorPassesThrough: a failing reader is not corruption.
func TestReaderErrorPassesThrough(t *testing.T) {
	boom := errors.New("disk on fire")
	valid := encode(t, []kv{{"a", "1"}})
	r := io.MultiReader(bytes.NewReader(valid[:12]), iotestErrReader{boom})
	_, err := Decode(r, testFormat, func(k, v []byte) error { return nil })
	if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want the reader's error and not ErrCorrupt", err)
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

func FuzzDecode(f *testing.F) {
	valid := encode(f, []kv{{"a", "1"}, {"b", ""}, {"c\xff", "xyz"}})
	flipped := bytes.Clone(valid)
	flipped[12] ^= 1
	for _, seed := range [][]byte{nil, encode(f, nil), valid, valid[:len(valid)-3], flipped} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kvs, err := decodeAll(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error from in-memory input is not ErrCorrupt: %v", err)
			}
			return
		}
		// The format is canonical: an accepted image re-encodes to itself.
		if again := encode(t, kvs); !bytes.Equal(again, data) {
			t.Fatalf("accepted image does not re-encode to itself:\n in %q\nout %q", data, again)
		}
	})
}
