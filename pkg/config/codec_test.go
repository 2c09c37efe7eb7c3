package config

import (
	"reflect"
	"testing"
)

// The store and the manager are tested end to end in test/sdk, on
// MetaStore and etcd; these tests cover the codec.

type sample struct {
	Name  string
	Limit int
	Tags  []string
}

func TestJSONCodecRoundTrip(t *testing.T) {
	var c Codec[sample] = JSON[sample]{}
	in := sample{Name: "x", Limit: 3, Tags: []string{"a"}}
	b, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"Name":"x","Limit":3,"Tags":["a"]}` {
		t.Fatalf("encoded %s", b)
	}
	out, err := c.Decode(b)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("decoded %+v, %v", out, err)
	}
	if _, err := c.Decode([]byte(`{"Limit":"three"}`)); err == nil {
		t.Fatal("decoding a mistyped field succeeded")
	}
}

// FuzzJSONDecode: values come from the store, written by anyone. Decoding
// never panics, and a decoded value survives a round trip.
func FuzzJSONDecode(f *testing.F) {
	f.Add([]byte(`{"Name":"x","Limit":3,"Tags":["a"]}`))
	f.Add([]byte(`{"Limit":-1}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c JSON[sample]
		v, err := c.Decode(data)
		if err != nil {
			return
		}
		b, err := c.Encode(v)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", v, err)
		}
		again, err := c.Decode(b)
		if err != nil || !reflect.DeepEqual(v, again) {
			t.Fatalf("round trip of %+v gave %+v, %v", v, again, err)
		}
	})
}
