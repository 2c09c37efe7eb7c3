package kvstoretest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// A compaction deletes the old revisions a bounded number per Commit
// (kvstore's compact.go). These tests run the same requests on a store
// that deletes one key's old revisions per Commit (CompactionStep 1) and
// on one that deletes them all in the Commit of the compaction, and check
// that nothing observable differs at any point: how far a member got with
// the deletions differs between members of a cluster.

// oneStep is a CompactionStep no test history reaches: the whole
// compaction in the Commit that schedules it.
const oneStep = 1 << 30

// compactionHistory is a deterministic mix of puts, deletes and txns over
// a few keys, with two compactions, the second scheduled while the first
// is still being deleted in steps. Its first compaction is at a revision
// where every key is deleted, so HashKV's keep set is empty there (etcd
// then hashes every stored revision).
func compactionHistory(seed uint64) []any {
	rng := rand.New(rand.NewPCG(seed, 7))
	key := func() string { return fmt.Sprintf("k%d", rng.IntN(12)) }
	var reqs []any
	write := func(n int) {
		for range n {
			switch r := rng.IntN(20); {
			case r < 12:
				reqs = append(reqs, put(key(), fmt.Sprint(rng.IntN(1000))))
			case r < 16:
				reqs = append(reqs, del(key()))
			case r < 19:
				a, b := key(), key()
				if a == b {
					b += "x"
				}
				reqs = append(reqs, txn(nil, ops(OpPut(put(a, "t")), OpPut(put(b, "t"))), nil))
			default:
				// Deletes to the end of the key space and re-creates a
				// key at the same revision (kvstore's doc: a deliberate
				// difference from etcd, which the compaction must keep).
				k := key()
				reqs = append(reqs, txn(nil, ops(OpDel(delSpan(k, "\x00")), OpPut(put(k, "again"))), nil))
			}
		}
	}
	write(60)
	// The txn puts k5 and then deletes every key, k5 included, at the
	// same main revision: a compaction there drops the put (the newest
	// entry <= it is the tombstone), a record at the compacted revision
	// itself that Events from there must not return while it waits to be
	// deleted.
	reqs = append(reqs, txn(nil, ops(OpPut(put("k5", "z")), OpDel(delSpan("\x00", "\x00"))), nil), compactAtCurrent{})
	reqs = append(reqs, put("k1", "a"), put("k2", "b"), put("k3", "c"), put("k4", "d"), compactAtCurrent{back: 2})
	write(30)
	return reqs
}

// compactAtCurrent compacts at the store revision minus back.
type compactAtCurrent struct{ back int64 }

func execHistoryStep(s *kvstore.Store, req any) (any, error) {
	if c, ok := req.(compactAtCurrent); ok {
		req = compact(s.Rev() - c.back)
	}
	return Exec(s, req)
}

// observe is everything a client can observe of s (dumpState), plus the
// whole backend's Hash.
func observe(t *testing.T, s *kvstore.Store) string {
	t.Helper()
	h, err := s.Hash()
	if err != nil {
		t.Fatalf("hash: %v", err)
	}
	return fmt.Sprintf("%shash %08x\n", dumpState(t, s), h)
}

// storedRevisions counts the MVCC records the backend holds.
func storedRevisions(t *testing.T, s *kvstore.Store) int {
	t.Helper()
	v := s.SnapshotView()
	defer v.Release()
	n := 0
	if err := v.Ascend([]byte{kvstore.BucketRevision}, []byte{kvstore.BucketRevision + 1}, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// image copies s's committed state into a new store on a new backend,
// as a crash right after the last Commit leaves it on disk.
func image(t *testing.T, s *kvstore.Store, newBackend func(t *testing.T) kvstore.Backend) *kvstore.Store {
	t.Helper()
	b := newBackend(t)
	if err := b.Restore(writeImage(t, s)); err != nil {
		t.Fatalf("restore image: %v", err)
	}
	return open(t, b, kvstore.Options{CompactionStep: 1})
}

// writeImage writes the image of s's last Commit (a raft snapshot).
func writeImage(t *testing.T, s *kvstore.Store) *bytes.Buffer {
	t.Helper()
	view := s.SnapshotView()
	defer view.Release()
	var img bytes.Buffer
	if _, err := view.WriteTo(&img); err != nil {
		t.Fatalf("write image: %v", err)
	}
	return &img
}

// finish commits until s has deleted every compacted revision.
func finish(t *testing.T, s *kvstore.Store) {
	t.Helper()
	for i := 0; s.Compacting(); i++ {
		if i > 10000 {
			t.Fatal("compaction does not finish")
		}
		mustCommit(t, s)
	}
}

func testCompactionInSteps(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			once := open(t, newBackend(t), kvstore.Options{CompactionStep: oneStep})
			stepped := open(t, newBackend(t), kvstore.Options{CompactionStep: 1})
			var (
				midway  int // observations made while stepped had records left to delete
				crashes int
			)
			for i, req := range compactionHistory(seed) {
				r1, err1 := execHistoryStep(once, req)
				r2, err2 := execHistoryStep(stepped, req)
				if fmt.Sprint(err1) != fmt.Sprint(err2) {
					t.Fatalf("request %d %v: errors %v and %v", i, req, err1, err2)
				}
				if err1 == nil {
					if same, diff := SameResponse(r2, r1); !same {
						t.Fatalf("request %d %v:%s", i, req, diff)
					}
				}
				if once.Compacting() {
					t.Fatalf("request %d: the one-step store is still compacting", i)
				}
				want := observe(t, once)
				if got := observe(t, stepped); got != want {
					t.Fatalf("request %d: compacting in steps, the store differs:\n got %s\nwant %s", i, got, want)
				}
				if !stepped.Compacting() {
					continue
				}
				midway++
				if storedRevisions(t, stepped) <= storedRevisions(t, once) {
					t.Fatalf("request %d: the stepped store is compacting but holds no more records than the finished one", i)
				}
				// A crash now: the image reopens with the same state, and
				// finishes the compaction to the same records.
				crashes++
				crashed := image(t, stepped, newBackend)
				if !crashed.Compacting() {
					t.Fatalf("request %d: the reopened image does not resume the compaction", i)
				}
				if got := observe(t, crashed); got != want {
					t.Fatalf("request %d: reopened mid-compaction, the store differs:\n got %s\nwant %s", i, got, want)
				}
				finish(t, crashed)
				if got := observe(t, crashed); got != want {
					t.Fatalf("request %d: after finishing the reopened compaction, the store differs:\n got %s\nwant %s", i, got, want)
				}
				if got, want := storedRevisions(t, crashed), storedRevisions(t, once); got != want {
					t.Fatalf("request %d: the reopened store finished with %d records, the one-step store has %d", i, got, want)
				}
				crashed.Close()
			}
			if midway < 10 || crashes < 10 {
				t.Fatalf("only %d observations during the compaction: the history does not exercise the steps", midway)
			}
			finish(t, stepped)
			if got, want := storedRevisions(t, stepped), storedRevisions(t, once); got != want {
				t.Fatalf("stepped store finished with %d records, the one-step store has %d", got, want)
			}
			if got, want := observe(t, stepped), observe(t, once); got != want {
				t.Fatalf("after finishing, the stores differ:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// testCompactionProgressHashKV: two members at different progress of the
// same compaction give the same HashKV at the compacted revision (what
// the corruption check compares), also when every key is deleted there.
func testCompactionProgressHashKV(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	reqs := []any{put("a", "1"), put("b", "1"), put("a", "2"), put("c", "1"), put("b", "2"), del("c")}
	for i := range 40 {
		reqs = append(reqs, put(fmt.Sprintf("m%02d", i), "x"), put(fmt.Sprintf("m%02d", i), "y"))
	}
	reqs = append(reqs, delSpan("\x00", "\x00"))
	ahead := open(t, newBackend(t), kvstore.Options{CompactionStep: oneStep})
	behind := open(t, newBackend(t), kvstore.Options{CompactionStep: 1})
	for _, s := range []*kvstore.Store{ahead, behind} {
		for i, req := range reqs {
			if _, err := Exec(s, req); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}
	}
	at := ahead.Rev()
	for _, s := range []*kvstore.Store{ahead, behind} {
		if _, err := Exec(s, compact(at)); err != nil {
			t.Fatal(err)
		}
	}
	if !behind.Compacting() {
		t.Fatal("the member behind finished the compaction in one step")
	}
	for behind.Compacting() {
		h1, err1 := ahead.HashKV(at)
		h2, err2 := behind.HashKV(at)
		if err1 != nil || err2 != nil || h1 != h2 {
			t.Fatalf("HashKV at the compacted revision: %+v (%v) on the finished member, %+v (%v) on the one compacting",
				h1, err1, h2, err2)
		}
		mustCommit(t, behind)
	}
	// The history still holds records (the tombstones at the compacted
	// revision), and the hashes are those of an etcd that compacted.
	if n := storedRevisions(t, behind); n == 0 || n != storedRevisions(t, ahead) {
		t.Fatalf("%d records after the compaction, the finished member has %d", n, storedRevisions(t, ahead))
	}
}
