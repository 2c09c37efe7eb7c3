package kvstore

import (
	"bytes"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

func sameKeyValue(a, b *mvccpb.KeyValue) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) &&
		a.CreateRevision == b.CreateRevision && a.ModRevision == b.ModRevision &&
		a.Version == b.Version && a.Lease == b.Lease
}

// FuzzDecodeKeyValue checks that the fast decoder of stored values agrees
// with the generated protobuf decoder on any input: both fail, or both
// give the same KeyValue; and that keyOfKeyValue finds the key of the
// canonical encoding.
func FuzzDecodeKeyValue(f *testing.F) {
	seeds := []mvccpb.KeyValue{
		{},
		{Key: []byte("foo")},
		{Key: []byte("foo"), Value: []byte("bar"), CreateRevision: 2, ModRevision: 3, Version: 2, Lease: 0x10},
		{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 300), CreateRevision: 1 << 40, ModRevision: -1, Version: 1, Lease: -5},
	}
	for _, kv := range seeds {
		data, err := kv.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{0x0a, 0x05, 'a'})                    // truncated key
	f.Add([]byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff}) // truncated varint
	f.Add([]byte{0x0a, 0x01, 'a', 0x3a, 0x00})        // unknown field 7
	f.Add([]byte{0x0a, 0x01, 'a', 0x0a, 0x01, 'b'})   // key twice: the last wins
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, slow mvccpb.KeyValue
		fastErr := decodeKeyValue(data, &fast)
		slowErr := slow.Unmarshal(data)
		if (fastErr == nil) != (slowErr == nil) {
			t.Fatalf("fast decoder error %v, generated decoder error %v", fastErr, slowErr)
		}
		if fastErr != nil {
			return
		}
		if !sameKeyValue(&fast, &slow) {
			t.Fatalf("fast decoder %v, generated decoder %v", &fast, &slow)
		}
		// keyOfKeyValue reads the key of what the store writes: the
		// canonical encoding, key first.
		canonical, err := slow.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if key, ok := keyOfKeyValue(canonical); !ok || !bytes.Equal(key, slow.Key) {
			t.Fatalf("keyOfKeyValue(%x) = %q, %v; want %q", canonical, key, ok, slow.Key)
		}
	})
}

func TestMarshalKeyValueOwnsItsBytes(t *testing.T) {
	long := bytes.Repeat([]byte("v"), 1<<20)
	for _, c := range []mvccpb.KeyValue{
		{Key: []byte("key"), Value: []byte("value"), CreateRevision: 2, ModRevision: 5, Version: 3, Lease: 7},
		{Key: []byte("key"), Value: []byte("value"), CreateRevision: 2, ModRevision: 5, Version: 3},
		{Key: []byte("key"), CreateRevision: 2, ModRevision: 5, Version: 1, Lease: -1},
		{Key: []byte("key"), ModRevision: 9},
		{Key: bytes.Repeat([]byte("k"), 300), Value: long, CreateRevision: 1 << 40, ModRevision: 1 << 40, Version: 1, Lease: 1 << 62},
	} {
		want := c
		want.Key, want.Value = bytes.Clone(c.Key), bytes.Clone(c.Value)
		key, value := bytes.Clone(c.Key), bytes.Clone(c.Value)
		c.Key, c.Value = key, value
		kv, data := marshalKeyValue(c)
		key[0] = 'X'
		if len(value) > 0 {
			value[0] = 'X'
		}
		var back mvccpb.KeyValue
		if err := back.Unmarshal(data); err != nil {
			t.Fatal(err)
		}
		if !sameKeyValue(kv, &want) || !sameKeyValue(&back, &want) {
			t.Fatalf("marshalKeyValue aliases its input: %v, encoded %v", kv, &back)
		}
		// Key and Value are the encoding's own bytes, capped so that an
		// append to them cannot write over the encoding.
		for _, b := range [][]byte{kv.Key, kv.Value} {
			if len(b) > 0 && (cap(b) != len(b) || !bytes.Contains(data, b)) {
				t.Fatalf("a field of %d bytes (cap %d) is not a capped part of the encoding", len(b), cap(b))
			}
		}
	}
}

func TestEncodeKeyValueScratch(t *testing.T) {
	scratch := make([]byte, 0, 64)
	data := encodeKeyValue(&mvccpb.KeyValue{Key: []byte("key"), ModRevision: 5}, scratch)
	if &data[0] != &scratch[:1][0] {
		t.Fatal("encodeKeyValue did not encode into the scratch buffer it was given")
	}
	// Too small a scratch buffer is replaced, not overrun.
	data = encodeKeyValue(&mvccpb.KeyValue{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 100)}, make([]byte, 0, 8))
	var back mvccpb.KeyValue
	if err := back.Unmarshal(data); err != nil || len(back.Value) != 100 {
		t.Fatalf("encoding past the scratch buffer's capacity: %v, %d value bytes", err, len(back.Value))
	}
}

func TestArena(t *testing.T) {
	single := arena{expect: 1}
	got := single.copy([]byte("abc"))
	if string(got) != "abc" || cap(got) != 3 || cap(single.buf) != 3 {
		t.Fatalf("single copy: %q cap %d, arena cap %d; want an exact allocation", got, cap(got), cap(single.buf))
	}
	many := arena{expect: 100}
	a, b := many.copy([]byte("12345678")), many.copy([]byte("abcdefgh"))
	a = append(a, 'x') // must not overwrite b: copies are capped
	if string(b) != "abcdefgh" || string(a) != "12345678x" {
		t.Fatalf("copies share bytes: %q %q", a, b)
	}
	big := bytes.Repeat([]byte("z"), arenaChunk)
	if got := many.copy(big); !bytes.Equal(got, big) {
		t.Fatal("large copy differs")
	}
}
