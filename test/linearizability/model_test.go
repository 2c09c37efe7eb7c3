package linearizability

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The model must reject what a broken store would do, or the end-to-end
// check could not fail.
func TestRegisterModel(t *testing.T) {
	put := func(client int, v string, call, ret int64, unknown bool) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: input{kind: opPut, key: "k", value: v}, Output: output{unknown: unknown}, Call: call, Return: ret}
	}
	get := func(client int, v string, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: input{kind: opGet, key: "k"}, Output: output{value: v}, Call: call, Return: ret}
	}
	cas := func(client int, old, v string, ok bool, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: input{kind: opCAS, key: "k", old: old, value: v}, Output: output{ok: ok}, Call: call, Return: ret}
	}
	const never = 1 << 62
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"read after write", []porcupine.Operation{put(0, "a", 0, 1, false), get(1, "a", 2, 3)}, true},
		{"stale read after acknowledged write", []porcupine.Operation{put(0, "a", 0, 1, false), put(0, "b", 2, 3, false), get(1, "a", 4, 5)}, false},
		{"lost acknowledged write", []porcupine.Operation{put(0, "a", 0, 1, false), get(1, "", 2, 3)}, false},
		{"concurrent write seen or not", []porcupine.Operation{put(0, "a", 0, 10, false), get(1, "", 1, 2), get(1, "a", 3, 4)}, true},
		{"unknown write applied", []porcupine.Operation{put(0, "a", 0, never, true), get(1, "a", 5, 6)}, true},
		{"unknown write never applied", []porcupine.Operation{put(0, "a", 0, never, true), get(1, "", 5, 6)}, true},
		{"unknown write applied, then undone", []porcupine.Operation{put(0, "a", 0, never, true), get(1, "a", 5, 6), get(1, "", 7, 8)}, false},
		{"cas swaps", []porcupine.Operation{put(0, "a", 0, 1, false), cas(1, "a", "b", true, 2, 3), get(2, "b", 4, 5)}, true},
		{"cas swapped the wrong value", []porcupine.Operation{put(0, "a", 0, 1, false), cas(1, "x", "b", true, 2, 3)}, false},
		{"cas refused the right value", []porcupine.Operation{put(0, "a", 0, 1, false), cas(1, "a", "b", false, 2, 3)}, false},
		{"cas on absent key", []porcupine.Operation{cas(1, "", "b", true, 0, 1), get(0, "b", 2, 3)}, true},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(registerModel, c.history); got != c.want {
			t.Errorf("%s: linearizable = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestResolveUnknown: an unknown write absent from the event history is
// dropped; one present becomes known, returning by the first operation
// that saw its revision.
func TestResolveUnknown(t *testing.T) {
	ops := []porcupine.Operation{
		{ClientId: 0, Input: input{kind: opPut, key: "k", value: "a"}, Output: output{unknown: true}, Call: 0, Return: math.MaxInt64},
		{ClientId: 1, Input: input{kind: opCAS, key: "k", value: "b", old: "x"}, Output: output{unknown: true}, Call: 1, Return: math.MaxInt64},
		{ClientId: 2, Input: input{kind: opGet, key: "k"}, Output: output{value: "a", rev: 5}, Call: 10, Return: 20},
		{ClientId: 3, Input: input{kind: opPut, key: "k", value: "c"}, Output: output{rev: 7}, Call: 12, Return: 15},
	}
	events := []*mvccpb.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("a"), ModRevision: 5}},
		{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("c"), ModRevision: 7}}}
	out, resolved, dropped := resolveUnknown(ops, events)
	if resolved != 1 || dropped != 1 || len(out) != 3 {
		t.Fatalf("resolved %d, dropped %d, kept %d; want 1, 1, 3", resolved, dropped, len(out))
	}
	if o := out[0].Output.(output); o.unknown || o.rev != 5 || out[0].Return != 15 {
		t.Errorf("resolved put: output %+v, return %d; want known at revision 5, returning at 15", o, out[0].Return)
	}
	if res := porcupine.CheckOperations(registerModel, out); !res {
		t.Error("the resolved history is not linearizable")
	}
}
