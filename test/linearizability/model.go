package linearizability

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// opKind is what an operation does.
type opKind int

const (
	opGet opKind = iota
	opPut
	opCAS
)

// input is an operation as invoked.
type input struct {
	kind  opKind
	key   string
	value string // put: the value; cas: the new value
	old   string // cas: the expected value ("" = absent)
}

// output is an operation's outcome.
type output struct {
	// unknown: the operation failed or timed out and may or may not have
	// taken effect.
	unknown bool
	value   string // get: the value read
	ok      bool   // cas: whether it swapped
	// rev is the response header's revision (0 when unknown): the
	// store's revision the operation saw or made.
	rev int64
}

// registerModel is a register per key: the state is the key's value, ""
// while absent.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(input).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		s, i, o := state.(string), in.(input), out.(output)
		switch i.kind {
		case opGet:
			return o.value == s, s
		case opPut:
			return true, i.value
		case opCAS:
			swapped := s == i.old
			if o.unknown {
				// Applied here or never: either way it swapped iff the
				// value was the expected one.
				if swapped {
					return true, i.value
				}
				return true, s
			}
			if swapped != o.ok {
				return false, s
			}
			if swapped {
				return true, i.value
			}
			return true, s
		}
		return false, s
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		result := "?"
		switch {
		case o.unknown:
		case i.kind == opGet:
			result = fmt.Sprintf("%q", o.value)
		case i.kind == opPut:
			result = "ok"
		default:
			result = fmt.Sprint(o.ok)
		}
		switch i.kind {
		case opGet:
			return fmt.Sprintf("get(%s) -> %s", i.key, result)
		case opPut:
			return fmt.Sprintf("put(%s, %q) -> %s", i.key, i.value, result)
		}
		return fmt.Sprintf("cas(%s, %q, %q) -> %s", i.key, i.old, i.value, result)
	},
}

// history records operations from concurrent clients against one clock.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newHistory() *history { return &history{start: time.Now()} }

// now is the time since the history began, in nanoseconds (monotonic).
func (h *history) now() int64 { return int64(time.Since(h.start)) }

// add records one completed operation. An unknown outcome is given a
// response time after every other operation, so the checker may place it
// anywhere after its invocation, including never.
func (h *history) add(client int, in input, out output, call, ret int64) {
	if out.unknown {
		if in.kind == opGet {
			return // a failed read changed nothing
		}
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
	h.mu.Unlock()
}

// operations returns the recorded operations.
func (h *history) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}
