package discovery

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Registration, watching and resolving against a server are tested end to
// end in test/sdk, on MetaStore and etcd, together with etcd's own naming
// package; these tests cover the record format and the set arithmetic.

func TestRecordIsEtcdNamingFormat(t *testing.T) {
	got, err := encodeEndpoint(Endpoint{Addr: "10.0.0.1:80", Metadata: map[string]string{"zone": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	// etcd's naming/endpoints/internal.Update, marshalled by encoding/json.
	if want := `{"Op":0,"Addr":"10.0.0.1:80","Metadata":{"zone":"a"}}`; got != want {
		t.Fatalf("record = %s, want %s", got, want)
	}
	ep, err := decodeEndpoint([]byte(`{"Op":0,"Addr":"h:1","Metadata":"m"}`))
	if err != nil || ep.Addr != "h:1" || ep.Metadata != "m" {
		t.Fatalf("decode = %+v, %v", ep, err)
	}
	for _, bad := range []string{``, `{`, `{"Op":0}`, `[]`, `{"Addr":""}`} {
		if _, err := decodeEndpoint([]byte(bad)); err == nil {
			t.Errorf("decode(%q) succeeded", bad)
		}
	}
}

func TestDiff(t *testing.T) {
	a := Endpoint{Addr: "a"}
	b := Endpoint{Addr: "b"}
	b2 := Endpoint{Addr: "b", Metadata: "changed"}
	c := Endpoint{Addr: "c"}
	got := diff(map[string]Endpoint{"s/a": a, "s/b": b}, map[string]Endpoint{"s/b": b2, "s/c": c})
	want := []Event{
		{Type: Removed, Key: "s/a", Endpoint: a},
		{Type: Added, Key: "s/b", Endpoint: b2},
		{Type: Added, Key: "s/c", Endpoint: c},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff = %+v, want %+v", got, want)
	}
	if got := diff(map[string]Endpoint{"s/a": a}, map[string]Endpoint{"s/a": a}); len(got) != 0 {
		t.Fatalf("diff of equal sets = %+v", got)
	}
}

func TestValidateService(t *testing.T) {
	for _, s := range []string{"", "svc/"} {
		if validateService(s) == nil {
			t.Errorf("service %q accepted", s)
		}
	}
	for _, s := range []string{"svc", "/svc", "a/b"} {
		if err := validateService(s); err != nil {
			t.Errorf("service %q rejected: %v", s, err)
		}
	}
}

// FuzzDecodeEndpoint: records come from the store, written by anyone.
// Decoding never panics, and a decoded record survives a round trip.
func FuzzDecodeEndpoint(f *testing.F) {
	f.Add([]byte(`{"Op":0,"Addr":"10.0.0.1:80","Metadata":{"zone":"a"}}`))
	f.Add([]byte(`{"Op":1,"Addr":"x"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ep, err := decodeEndpoint(data)
		if err != nil {
			return
		}
		encoded, err := encodeEndpoint(ep)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", ep, err)
		}
		again, err := decodeEndpoint([]byte(encoded))
		if err != nil {
			t.Fatalf("re-decode %s: %v", encoded, err)
		}
		a, _ := json.Marshal(ep)
		b, _ := json.Marshal(again)
		if string(a) != string(b) {
			t.Fatalf("round trip changed %s into %s", a, b)
		}
	})
}
