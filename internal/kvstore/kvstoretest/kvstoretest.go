package kvstoretest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// Run runs the whole suite. newBackend returns a new, empty backend and
// registers its own cleanup (Close) with t.
func Run(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	t.Run("Scenarios", func(t *testing.T) {
		for _, sc := range Scenarios() {
			t.Run(sc.Name, func(t *testing.T) { runScenario(t, sc, newBackend) })
		}
	})
	tests := []struct {
		name string
		fn   func(t *testing.T, newBackend func(t *testing.T) kvstore.Backend)
	}{
		{"ApplySideVisibility", testApplySideVisibility},
		{"CommitEvents", testCommitEvents},
		{"Events", testEvents},
		{"PrevKV", testPrevKV},
		{"HashKV", testHashKV},
		{"Hash", testHash},
		{"Aux", testAux},
		{"ConsistentIndex", testConsistentIndex},
		{"PhysicalCompaction", testPhysicalCompaction},
		{"CompactionInSteps", testCompactionInSteps},
		{"CompactionProgressHashKV", testCompactionProgressHashKV},
		{"Leases", testLeases},
		{"TxnWrite", testTxnWrite},
		{"ReadOnlyTxnClassification", testTxnClassification},
		{"ConcurrentReadsAndCompaction", testConcurrentReads},
		{"SnapshotViewIsolation", testSnapshotViewIsolation},
		{"RestoreRejectsGarbage", testRestoreRejectsGarbage},
		{"CommitFailure", testCommitFailure},
		{"Close", testClose},
		{"ResponseBounds", testResponseBounds},
		{"RangeStream", testRangeStream},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newBackend) })
	}
}

// open opens a store on b, failing the test on error.
func open(t *testing.T, b kvstore.Backend, opts kvstore.Options) *kvstore.Store {
	t.Helper()
	s, err := kvstore.Open(b, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// RunSteps runs steps on s, failing t at the first answer that differs.
func RunSteps(t *testing.T, s *kvstore.Store, steps []Step) {
	t.Helper()
	for i, st := range steps {
		got, err := Exec(s, st.Req)
		if st.Err != nil {
			if !errors.Is(err, st.Err) {
				t.Fatalf("step %d %T{%v}: error %v, want %v", i, st.Req, st.Req, err, st.Err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d %T{%v}: %v", i, st.Req, st.Req, err)
		}
		if same, diff := SameResponse(got, st.Want); !same {
			t.Fatalf("step %d %T{%v}:%s", i, st.Req, st.Req, diff)
		}
	}
}

func runScenario(t *testing.T, sc Scenario, newBackend func(t *testing.T) kvstore.Backend) {
	b := newBackend(t)
	s := open(t, b, kvstore.Options{Leases: NewLeases(sc.Leases...)})
	RunSteps(t, s, sc.Steps)

	// Whatever the history, reopening the backend and restoring an image
	// into another store give the same observable state.
	want := dumpState(t, s)
	img := writeImage(t, s)
	s.Close()
	reopened := open(t, b, kvstore.Options{Leases: NewLeases(sc.Leases...)})
	if got := dumpState(t, reopened); got != want {
		t.Fatalf("state after reopen differs:\n got %s\nwant %s", got, want)
	}
	other := open(t, newBackend(t), kvstore.Options{Leases: NewLeases(sc.Leases...)})
	RunSteps(t, other, []Step{ok(put("will be replaced", "x"), putResp(2, nil))})
	if err := other.Restore(img); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := dumpState(t, other); got != want {
		t.Fatalf("state after restore differs:\n got %s\nwant %s", got, want)
	}
}

// dumpState renders everything a client can observe of s: revisions,
// the consistent index, every key at every readable revision, the whole
// event history, HashKV at every readable revision and the aux buckets.
func dumpState(t *testing.T, s *kvstore.Store) string {
	t.Helper()
	var sb strings.Builder
	index, term := s.ConsistentIndex()
	fmt.Fprintf(&sb, "rev %d compact %d applied %d/%d\n", s.Rev(), s.CompactRev(), index, term)
	first := max(s.CompactRev(), 1)
	for rev := first; rev <= s.Rev(); rev++ {
		resp, err := s.Range(&pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
		if err != nil {
			t.Fatalf("range at %d: %v", rev, err)
		}
		fmt.Fprintf(&sb, "at %d: %v\n", rev, resp)
		h, err := s.HashKV(rev)
		if err != nil {
			t.Fatalf("hashkv at %d: %v", rev, err)
		}
		fmt.Fprintf(&sb, "hashkv %d: %+v\n", rev, h)
	}
	events, next, err := s.Events(first, 0, []byte{0}, []byte{0}, 0)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	fmt.Fprintf(&sb, "events up to %d: %v\n", next, events)
	for _, bucket := range []byte{kvstore.BucketLease, kvstore.BucketMembership, kvstore.BucketAuth} {
		err := s.AscendAux(bucket, func(k, v []byte) bool {
			fmt.Fprintf(&sb, "aux %c %q=%q\n", bucket, k, v)
			return true
		})
		if err != nil {
			t.Fatalf("ascend aux %c: %v", bucket, err)
		}
	}
	return sb.String()
}
