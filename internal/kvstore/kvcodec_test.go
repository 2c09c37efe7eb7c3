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
	key, value := []byte("key"), []byte("value")
	scratch := make([]byte, 0, 64)
	kv, data := marshalKeyValue(mvccpb.KeyValue{Key: key, Value: value, CreateRevision: 2, ModRevision: 5, Version: 3, Lease: 7}, scratch)
	if &data[0] != &scratch[:1][0] {
		t.Fatal("marshalKeyValue did not encode into the scratch buffer it was given")
	}
	key[0], value[0] = 'X', 'X'
	var back mvccpb.KeyValue
	if err := back.Unmarshal(data); err != nil {
		t.Fatal(err)
	}
	want := &mvccpb.KeyValue{Key: []byte("key"), Value: []byte("value"), CreateRevision: 2, ModRevision: 5, Version: 3, Lease: 7}
	if !sameKeyValue(kv, want) || !sameKeyValue(&back, want) {
		t.Fatalf("marshalKeyValue aliases its input: %v, encoded %v", kv, &back)
	}
	// The next record reuses scratch; the first one's copy must not move.
	encodeKeyValue(&mvccpb.KeyValue{Key: []byte("other-key"), Value: []byte("other-value")}, scratch)
	if !sameKeyValue(kv, want) {
		t.Fatalf("marshalKeyValue's copy aliases the scratch buffer: %v", kv)
	}
	// Too small a scratch buffer is replaced, not overrun.
	_, data = marshalKeyValue(mvccpb.KeyValue{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 100)}, make([]byte, 0, 8))
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
