package linearizability

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// checkTimeout bounds the linearizability check itself.
const checkTimeout = 5 * time.Minute

// verdict is the outcome of the linearizability check.
type verdict struct {
	ops, unknown int    // operations checked; how many of unknown outcome
	result       string // linearizable, NOT linearizable, undecided
	err          error  // non-nil unless linearizable
}

// checkHistory resolves the unknown outcomes against the event history
// (resolveUnknown) and checks the operations with porcupine. A violation
// writes porcupine's visualisation to the temporary directory.
func checkHistory(t *testing.T, h *history, events []*mvccpb.Event, seed uint64) verdict {
	t.Helper()
	raw := h.operations()
	ops, resolved, dropped := resolveUnknown(raw, events)
	v := verdict{ops: len(ops)}
	for _, op := range raw {
		if op.Output.(output).unknown {
			v.unknown++
		}
	}
	t.Logf("checking %d operations (%d of unknown outcome: %d found in the event history, %d not there and dropped)",
		len(ops), v.unknown, resolved, dropped)
	res, info := porcupine.CheckOperationsVerbose(registerModel, ops, checkTimeout)
	switch res {
	case porcupine.Ok:
		v.result = "linearizable"
	case porcupine.Illegal:
		v.result = "NOT linearizable"
		path := filepath.Join(os.TempDir(), fmt.Sprintf("linearizability-%d.html", seed))
		if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
			t.Errorf("write visualisation: %v", err)
		}
		v.err = fmt.Errorf("history is not linearizable; see %s", path)
	default:
		v.result = "undecided"
		v.err = fmt.Errorf("the checker could not decide within %v", checkTimeout)
	}
	return v
}

// resolveUnknown settles the writes of unknown outcome with the full
// event history (every event from revision 1 through a revision read
// after every operation ended; values are unique, so an event names its
// write):
//
//   - a write whose value is in no event never took effect before any
//     operation observed the store, which is as if it were linearized
//     after everything: it is dropped;
//   - a write whose value is in an event at revision r took effect (a
//     put; a CAS that swapped), before the return of every operation whose
//     response header shows a revision >= r: its outcome becomes known and
//     its response time the earliest of those.
//
// Both keep exactly the linearizations that were possible before; they
// spare porcupine the operations that stay open until the end of the
// history, which made long runs undecidable within its bound.
func resolveUnknown(ops []porcupine.Operation, events []*mvccpb.Event) (out []porcupine.Operation, resolved, dropped int) {
	applied := map[string]int64{}
	for _, ev := range events {
		if ev.Type == mvccpb.PUT {
			applied[string(ev.Kv.Value)] = ev.Kv.ModRevision
		}
	}
	bound := earliestReturnSince(ops)
	for _, op := range ops {
		o := op.Output.(output)
		if !o.unknown {
			out = append(out, op)
			continue
		}
		in := op.Input.(input)
		rev, ok := applied[in.value]
		if !ok {
			dropped++
			continue
		}
		resolved++
		op.Output = output{ok: in.kind == opCAS, rev: rev}
		op.Return = max(bound(rev), op.Call+1)
		out = append(out, op)
	}
	return out, resolved, dropped
}

// earliestReturnSince returns a function giving, for a revision r, the
// earliest response time of a known operation whose header revision is
// at least r (math.MaxInt64 if none).
func earliestReturnSince(ops []porcupine.Operation) func(int64) int64 {
	type point struct{ rev, ret int64 }
	var pts []point
	for _, op := range ops {
		if o := op.Output.(output); !o.unknown && o.rev > 0 {
			pts = append(pts, point{o.rev, op.Return})
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].rev < pts[j].rev })
	// suffixMin[i] is the earliest return among pts[i:].
	suffixMin := make([]int64, len(pts)+1)
	suffixMin[len(pts)] = math.MaxInt64
	for i := len(pts) - 1; i >= 0; i-- {
		suffixMin[i] = min(pts[i].ret, suffixMin[i+1])
	}
	return func(r int64) int64 {
		i := sort.Search(len(pts), func(i int) bool { return pts[i].rev >= r })
		return suffixMin[i]
	}
}
