package linearizability

import (
	"testing"

	"github.com/anishathalye/porcupine"
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
