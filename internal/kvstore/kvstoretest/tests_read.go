package kvstoretest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

func putEv(k *mvccpb.KeyValue) mvccpb.Event { return mvccpb.Event{Type: mvccpb.PUT, Kv: k} }
func delEv(key string, rev int64) mvccpb.Event {
	return mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

func testEvents(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s := open(t, newBackend(t), kvstore.Options{})
	RunSteps(t, s, []Step{
		ok(put("a", "1"), putResp(2, nil)),
		ok(put("b", "1"), putResp(3, nil)),
		ok(txn(nil, ops(OpPut(put("a", "2")), OpPut(put("c", "1")), OpDel(del("b"))), nil),
			txnResp(4, true, res(resPut(putResp(4, nil)), resPut(putResp(4, nil)), resDel(delResp(4, 1))))),
		ok(del("a"), delResp(5, 1)),
		ok(put("d", "1"), putResp(6, nil)),
	})
	a2, b3 := putEv(kv("a", "1", 2, 2, 1)), putEv(kv("b", "1", 3, 3, 1))
	a4, c4, b4 := putEv(kv("a", "2", 2, 4, 2)), putEv(kv("c", "1", 4, 4, 1)), delEv("b", 4)
	a5, d6 := delEv("a", 5), putEv(kv("d", "1", 6, 6, 1))
	cases := []struct {
		name            string
		start, end      int64
		key, rangeEnd   string
		limit           int
		want            []mvccpb.Event
		next            int64
		wantErr         error
		compactedBefore int64
	}{
		{name: "everything", start: 1, key: "\x00", rangeEnd: "\x00", want: []mvccpb.Event{a2, b3, a4, c4, b4, a5, d6}, next: 7},
		{name: "empty key to the end", start: 0, key: "", rangeEnd: "\x00", want: []mvccpb.Event{a2, b3, a4, c4, b4, a5, d6}, next: 7},
		{name: "one revision", start: 4, end: 5, key: "\x00", rangeEnd: "\x00", want: []mvccpb.Event{a4, c4, b4}, next: 5},
		{name: "end beyond current", start: 5, end: 100, key: "\x00", rangeEnd: "\x00", want: []mvccpb.Event{a5, d6}, next: 7},
		{name: "single key", start: 1, key: "a", want: []mvccpb.Event{a2, a4, a5}, next: 7},
		{name: "range", start: 1, key: "b", rangeEnd: "d", want: []mvccpb.Event{b3, c4, b4}, next: 7},
		{name: "limit", start: 2, key: "\x00", rangeEnd: "\x00", limit: 1, want: []mvccpb.Event{a2}, next: 3},
		{name: "limit keeps a revision whole", start: 4, key: "\x00", rangeEnd: "\x00", limit: 1, want: []mvccpb.Event{a4, c4, b4}, next: 5},
		{name: "limit across revisions", start: 3, key: "\x00", rangeEnd: "\x00", limit: 2, want: []mvccpb.Event{b3, a4, c4, b4}, next: 5},
		{name: "limit counts matching events only", start: 2, key: "a", limit: 1, want: []mvccpb.Event{a2}, next: 3},
		{name: "after the current revision", start: 9, key: "\x00", rangeEnd: "\x00", next: 9},
		{name: "compacted", start: 3, key: "\x00", rangeEnd: "\x00", wantErr: kvstore.ErrCompacted, compactedBefore: 4},
		{name: "at the compacted revision", start: 4, key: "\x00", rangeEnd: "\x00", want: []mvccpb.Event{a4, c4, b4, a5, d6}, next: 7, compactedBefore: 4},
	}
	for _, tc := range cases {
		if tc.compactedBefore > s.CompactRev() {
			RunSteps(t, s, []Step{ok(compact(tc.compactedBefore), compactResp(6))})
		}
		var rangeEnd []byte
		if tc.rangeEnd != "" {
			rangeEnd = []byte(tc.rangeEnd)
		}
		got, next, err := s.Events(tc.start, tc.end, []byte(tc.key), rangeEnd, tc.limit)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("%s: error %v, want %v", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || next != tc.next {
			t.Fatalf("%s:\n got %v next %d\nwant %v next %d", tc.name, got, next, tc.want, tc.next)
		}
	}
}

func testPrevKV(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s := open(t, newBackend(t), kvstore.Options{})
	RunSteps(t, s, []Step{
		ok(put("a", "1"), putResp(2, nil)),
		ok(put("a", "2"), putResp(3, nil)),
		ok(del("a"), delResp(4, 1)),
		ok(put("a", "3"), putResp(5, nil)),
	})
	check := func(rev int64, want *mvccpb.KeyValue) {
		t.Helper()
		got, err := s.PrevKV([]byte("a"), rev)
		if err != nil {
			t.Fatalf("PrevKV at %d: %v", rev, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("PrevKV at %d = %v, want %v", rev, got, want)
		}
	}
	check(2, nil)
	check(3, kv("a", "1", 2, 2, 1))
	check(4, kv("a", "2", 2, 3, 2))
	check(5, nil)
	check(6, kv("a", "3", 5, 5, 1))
	check(100, nil)
	RunSteps(t, s, []Step{ok(compact(3), compactResp(5))})
	check(3, nil)
	check(4, kv("a", "2", 2, 3, 2))
}

func testHashKV(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s1 := open(t, newBackend(t), kvstore.Options{})
	s2 := open(t, newBackend(t), kvstore.Options{})
	hash := func(s *kvstore.Store, rev int64) kvstore.HashKVResult {
		t.Helper()
		h, err := s.HashKV(rev)
		if err != nil {
			t.Fatalf("HashKV(%d): %v", rev, err)
		}
		return h
	}
	history := []any{
		put("a", "1"), put("b", "2"), put("a", "3"), del("b"),
		txn(nil, ops(OpPut(put("c", "1")), OpPut(put("b", "x"))), nil), compact(3), put("d", ""),
	}
	seen := map[uint32]int64{}
	for i, req := range history {
		for _, s := range []*kvstore.Store{s1, s2} {
			if _, err := Exec(s, req); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		h1, h2 := hash(s1, 0), hash(s2, 0)
		if h1 != h2 {
			t.Fatalf("step %d: same history, different hashes %+v and %+v", i, h1, h2)
		}
		if h1.Revision != s1.Rev() || h1.HashRevision != s1.Rev() || h1.CompactRevision != s1.CompactRev() {
			t.Fatalf("step %d: %+v at revision %d compacted %d", i, h1, s1.Rev(), s1.CompactRev())
		}
		if _, isCompaction := req.(*pb.CompactionRequest); !isCompaction {
			if rev, dup := seen[h1.Hash]; dup {
				t.Fatalf("step %d: hash %08x equals the one at revision %d", i, h1.Hash, rev)
			}
		}
		seen[h1.Hash] = h1.HashRevision
	}
	// A hash at a past revision does not change with later writes.
	before := hash(s1, 5)
	if _, err := Exec(s1, put("e", "1")); err != nil {
		t.Fatal(err)
	}
	if after := hash(s1, 5); after.Hash != before.Hash || after.HashRevision != 5 || after.Revision != s1.Rev() {
		t.Fatalf("hash at 5 changed with a later write: %+v, then %+v", before, after)
	}
	if _, err := s1.HashKV(2); !errors.Is(err, kvstore.ErrCompacted) {
		t.Fatalf("HashKV below the compacted revision: %v", err)
	}
	if _, err := s1.HashKV(s1.Rev() + 1); !errors.Is(err, kvstore.ErrFutureRev) {
		t.Fatalf("HashKV above the current revision: %v", err)
	}
	hash(s1, 3) // at the compacted revision itself
}

func testHash(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s1 := open(t, newBackend(t), kvstore.Options{})
	s2 := open(t, newBackend(t), kvstore.Options{})
	for _, s := range []*kvstore.Store{s1, s2} {
		RunSteps(t, s, []Step{ok(put("a", "1"), putResp(2, nil))})
	}
	s2.SetConsistentIndex(1000, 7) // members differ here legitimately
	mustCommit(t, s2)
	h1, err1 := s1.Hash()
	h2, err2 := s2.Hash()
	if err1 != nil || err2 != nil || h1 != h2 {
		t.Fatalf("hashes %08x (%v) and %08x (%v) of the same data differ", h1, err1, h2, err2)
	}
	s2.PutAux(kvstore.BucketAuth, []byte("user"), []byte("x"))
	mustCommit(t, s2)
	if h3, err := s2.Hash(); err != nil || h3 == h1 {
		t.Fatalf("hash %08x (%v) did not change with the auth bucket", h3, err)
	}
}

func testTxnClassification(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	serial := func(key string) *pb.RequestOp {
		return OpRange(&pb.RangeRequest{Key: []byte(key), Serializable: true})
	}
	cases := []struct {
		name               string
		req                *pb.TxnRequest
		readOnly, serialOK bool
	}{
		{"empty", txn(nil, nil, nil), true, true},
		{"compares only", txn(cmps(CmpVersion("a", eq, 1)), nil, nil), true, true},
		{"linearizable range", txn(nil, ops(OpRange(get("a"))), nil), true, false},
		{"serializable ranges", txn(nil, ops(serial("a")), ops(serial("b"))), true, true},
		{"one range not serializable", txn(nil, ops(serial("a")), ops(OpRange(get("b")))), true, false},
		{"put in failure", txn(nil, ops(serial("a")), ops(OpPut(put("a", "1")))), false, false},
		{"delete", txn(nil, ops(OpDel(del("a"))), nil), false, false},
		{"nested read-only", txn(nil, ops(OpTxn(txn(nil, ops(serial("a")), ops(serial("b"))))), nil), true, true},
		{"nested linearizable", txn(nil, ops(OpTxn(txn(nil, nil, ops(OpRange(get("b")))))), nil), true, false},
		{"nested write", txn(nil, ops(serial("a"), OpTxn(txn(nil, nil, ops(OpDel(del("b")))))), nil), false, false},
		{"empty op", txn(nil, ops(&pb.RequestOp{}), nil), false, false},
	}
	s := open(t, newBackend(t), kvstore.Options{})
	for _, tc := range cases {
		if got := kvstore.IsTxnReadOnly(tc.req); got != tc.readOnly {
			t.Errorf("%s: IsTxnReadOnly = %v", tc.name, got)
		}
		if got := kvstore.IsTxnSerializable(tc.req); got != tc.serialOK {
			t.Errorf("%s: IsTxnSerializable = %v", tc.name, got)
		}
		if _, err := s.ReadTxn(tc.req); tc.readOnly == errors.Is(err, kvstore.ErrNotReadOnly) {
			t.Errorf("%s: ReadTxn error %v", tc.name, err)
		}
	}
	if s.Rev() != 1 {
		t.Fatalf("ReadTxn changed the revision to %d", s.Rev())
	}
}

func testSnapshotViewIsolation(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s := open(t, newBackend(t), kvstore.Options{})
	RunSteps(t, s, []Step{ok(put("a", "1"), putResp(2, nil)), ok(put("a", "2"), putResp(3, nil))})
	want := dumpState(t, s)
	view := s.SnapshotView()
	defer view.Release()
	RunSteps(t, s, []Step{
		ok(put("b", "1"), putResp(4, nil)),
		ok(compact(4), compactResp(4)),
		ok(del("a"), delResp(5, 1)),
	})
	var img bytes.Buffer
	if _, err := view.WriteTo(&img); err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	other := open(t, newBackend(t), kvstore.Options{})
	if err := other.Restore(&img); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := dumpState(t, other); got != want {
		t.Fatalf("image of an old view:\n got %s\nwant %s", got, want)
	}
}

func testRestoreRejectsGarbage(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s := open(t, newBackend(t), kvstore.Options{})
	RunSteps(t, s, []Step{ok(put("a", "1"), putResp(2, nil))})
	want := dumpState(t, s)
	if err := s.Restore(bytes.NewReader([]byte("not an image"))); err == nil {
		t.Fatal("restore of garbage succeeded")
	}
	if got := dumpState(t, s); got != want {
		t.Fatalf("state changed by a failed restore:\n got %s\nwant %s", got, want)
	}
	RunSteps(t, s, []Step{ok(put("a", "2"), putResp(3, nil))})
}

// failingBackend makes the commits of its batches fail once fail is set.
type failingBackend struct {
	kvstore.Backend
	fail bool
}

type failingBatch struct {
	kvstore.Batch
	b *failingBackend
}

var errCommitFailed = errors.New("injected commit failure")

func (f *failingBackend) NewBatch() kvstore.Batch {
	return &failingBatch{Batch: f.Backend.NewBatch(), b: f}
}

func (f *failingBatch) Commit() error {
	if f.b.fail {
		return errCommitFailed
	}
	return f.Batch.Commit()
}

func testCommitFailure(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	fb := &failingBackend{Backend: newBackend(t)}
	s := open(t, fb, kvstore.Options{})
	RunSteps(t, s, []Step{ok(put("a", "1"), putResp(2, nil))})
	fb.fail = true
	if _, err := Exec(s, put("a", "2")); !errors.Is(err, errCommitFailed) {
		t.Fatalf("put with a failing commit: %v", err)
	}
	fb.fail = false
	// The store no longer matches its backend: it refuses to go on.
	if _, err := s.Put(put("b", "1")); err == nil {
		t.Fatal("put accepted after a failed commit")
	}
	if _, err := s.Commit(); err == nil {
		t.Fatal("commit accepted after a failed commit")
	}
	mustRange(t, s, get("a"), found(2, kv("a", "1", 2, 2, 1))) // reads serve the last good state
}

func testClose(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s := open(t, newBackend(t), kvstore.Options{})
	RunSteps(t, s, []Step{ok(put("a", "1"), putResp(2, nil))})
	view := s.SnapshotView()
	defer view.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.Range(get("a")); !errors.Is(err, kvstore.ErrClosed) {
		t.Fatalf("range after close: %v", err)
	}
	if _, err := s.ReadTxn(txn(nil, ops(OpRange(get("a"))), nil)); !errors.Is(err, kvstore.ErrClosed) {
		t.Fatalf("read txn after close: %v", err)
	}
	if _, _, err := s.Events(1, 0, []byte("a"), nil, 0); !errors.Is(err, kvstore.ErrClosed) {
		t.Fatalf("events after close: %v", err)
	}
	if _, err := s.Put(put("a", "2")); !errors.Is(err, kvstore.ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
	// A view taken before Close stays readable until released.
	v, found, err := view.Get(revisionKey(2, 0))
	if err != nil || !found || len(v) == 0 {
		t.Fatalf("view after close: %q, %v, %v", v, found, err)
	}
}

// revisionKey is the backend key of revision {main, sub} (see kvstore's
// doc for the layout).
func revisionKey(main, sub int64) []byte {
	k := []byte{'r'}
	for _, n := range []int64{main, sub} {
		for shift := 56; shift >= 0; shift -= 8 {
			k = append(k, byte(n>>shift))
		}
	}
	return k
}
