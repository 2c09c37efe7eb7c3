package kvstoretest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// mustCommit commits the apply side's buffered changes and returns the
// events the commit made visible.
func mustCommit(t *testing.T, s *kvstore.Store) []mvccpb.Event {
	t.Helper()
	events, err := s.Commit()
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	return events
}

func mustRange(t *testing.T, s *kvstore.Store, r *pb.RangeRequest, want *pb.RangeResponse) {
	t.Helper()
	got, err := s.Range(r)
	if err != nil {
		t.Fatalf("range %v: %v", r, err)
	}
	if same, diff := SameResponse(got, want); !same {
		t.Fatalf("range %v:%s", r, diff)
	}
}

func testApplySideVisibility(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s := open(t, newBackend(t), kvstore.Options{})
	if _, err := s.Put(put("a", "1")); err != nil {
		t.Fatal(err)
	}
	// Not committed: readers see nothing, the apply side sees the write.
	mustRange(t, s, get("a"), rangeResp(1, 0, false))
	if s.Rev() != 1 {
		t.Fatalf("Rev before commit = %d, want 1", s.Rev())
	}
	resp, err := s.Put(&pb.PutRequest{Key: []byte("a"), Value: []byte("2"), PrevKv: true})
	if err != nil {
		t.Fatal(err)
	}
	if same, diff := SameResponse(resp, putResp(3, kv("a", "1", 2, 2, 1))); !same {
		t.Fatalf("put with prev_kv of an uncommitted value:%s", diff)
	}
	tr, err := s.Txn(txn(cmps(CmpValue("a", eq, "2")), ops(OpRange(get("a"))), nil))
	if err != nil {
		t.Fatal(err)
	}
	if same, diff := SameResponse(tr, txnResp(3, true, res(resRange(found(3, kv("a", "2", 2, 3, 2)))))); !same {
		t.Fatalf("txn over uncommitted state:%s", diff)
	}
	view := s.SnapshotView()
	defer view.Release()
	mustCommit(t, s)
	mustRange(t, s, get("a"), found(3, kv("a", "2", 2, 3, 2)))
	n := 0
	if err := view.Ascend(nil, nil, func(k, v []byte) bool { n++; return true }); err != nil || n != 0 {
		t.Fatalf("snapshot view taken before the commit holds %d keys (err %v), want 0", n, err)
	}
}

func testCommitEvents(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	var calls [][]mvccpb.Event
	s := open(t, newBackend(t), kvstore.Options{})
	commit := func() {
		t.Helper()
		if events := mustCommit(t, s); len(events) > 0 {
			calls = append(calls, events)
		}
	}
	if _, err := s.Put(put("a", "1")); err != nil {
		t.Fatal(err)
	}
	commit()
	if _, err := s.Put(put("b", "1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(txn(nil, ops(OpPut(put("c", "1")), OpDel(del("a"))), nil)); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 {
		t.Fatalf("%d commits returned events before the second commit, want 1", len(calls))
	}
	commit()
	commit() // nothing buffered: no events
	s.SetConsistentIndex(100, 1)
	commit() // no events
	if _, err := s.Compact(2); err != nil {
		t.Fatal(err)
	}
	commit()
	want := [][]mvccpb.Event{
		{{Type: mvccpb.PUT, Kv: kv("a", "1", 2, 2, 1)}},
		{
			{Type: mvccpb.PUT, Kv: kv("b", "1", 3, 3, 1)},
			{Type: mvccpb.PUT, Kv: kv("c", "1", 4, 4, 1)},
			{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 4}},
		},
	}
	if got, wantS := fmt.Sprint(calls), fmt.Sprint(want); got != wantS {
		t.Fatalf("events of the commits:\n got %s\nwant %s", got, wantS)
	}
}

func testConsistentIndex(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	b := newBackend(t)
	s := open(t, b, kvstore.Options{})
	if i, term := s.ConsistentIndex(); i != 0 || term != 0 {
		t.Fatalf("fresh store at %d/%d, want 0/0", i, term)
	}
	s.SetConsistentIndex(5, 2)
	if i, _ := s.ConsistentIndex(); i != 0 {
		t.Fatalf("consistent index %d visible before commit", i)
	}
	mustCommit(t, s)
	if i, term := s.ConsistentIndex(); i != 5 || term != 2 {
		t.Fatalf("after commit at %d/%d, want 5/2", i, term)
	}
	if _, err := s.Put(put("a", "1")); err != nil {
		t.Fatal(err)
	}
	s.SetConsistentIndex(6, 3)
	mustCommit(t, s)
	s.Close()
	s = open(t, b, kvstore.Options{})
	if i, term := s.ConsistentIndex(); i != 6 || term != 3 {
		t.Fatalf("after reopen at %d/%d, want 6/3", i, term)
	}
	mustRange(t, s, get("a"), found(2, kv("a", "1", 2, 2, 1)))
}

func testAux(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	b := newBackend(t)
	s := open(t, b, kvstore.Options{})
	aux := func(s *kvstore.Store, bucket byte, limit int) []string {
		t.Helper()
		var out []string
		err := s.AscendAux(bucket, func(k, v []byte) bool {
			out = append(out, string(k)+"="+string(v))
			return limit == 0 || len(out) < limit
		})
		if err != nil {
			t.Fatalf("ascend aux %q: %v", bucket, err)
		}
		return out
	}
	s.PutAux(kvstore.BucketLease, []byte("k2"), []byte("v2"))
	s.PutAux(kvstore.BucketLease, []byte("k1"), []byte("v1"))
	s.PutAux(kvstore.BucketMembership, []byte("m"), []byte("x"))
	s.PutAux(0xff, []byte("last"), []byte("bucket"))
	if got := aux(s, kvstore.BucketLease, 0); got != nil {
		t.Fatalf("aux visible before commit: %q", got)
	}
	mustCommit(t, s)
	checks := []struct {
		bucket byte
		limit  int
		want   []string
	}{
		{kvstore.BucketLease, 0, []string{"k1=v1", "k2=v2"}},
		{kvstore.BucketLease, 1, []string{"k1=v1"}},
		{kvstore.BucketMembership, 0, []string{"m=x"}},
		{kvstore.BucketAuth, 0, nil},
		{0xff, 0, []string{"last=bucket"}},
	}
	for _, c := range checks {
		if got := aux(s, c.bucket, c.limit); !slices.Equal(got, c.want) {
			t.Fatalf("bucket %q limit %d: %q, want %q", c.bucket, c.limit, got, c.want)
		}
	}
	s.DeleteAux(kvstore.BucketLease, []byte("k1"))
	mustCommit(t, s)
	s.Close()
	s = open(t, b, kvstore.Options{})
	if got := aux(s, kvstore.BucketLease, 0); !slices.Equal(got, []string{"k2=v2"}) {
		t.Fatalf("after delete and reopen: %q", got)
	}
	// The store's own buckets are not for others.
	for _, bucket := range []byte{'r', 'm'} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("PutAux into reserved bucket %q did not panic", bucket)
				}
			}()
			s.PutAux(bucket, []byte("x"), nil)
		}()
	}
}

func testLeases(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	b := newBackend(t)
	leases := NewLeases(16, 17)
	s := open(t, b, kvstore.Options{Leases: leases})
	withLeaseReq := func(key string, lease int64) *pb.PutRequest {
		return &pb.PutRequest{Key: []byte(key), Value: []byte("v"), Lease: lease}
	}
	expect := func(step string, want16, want17 []string) {
		t.Helper()
		if got := leases.Keys(16); !slices.Equal(got, want16) {
			t.Fatalf("%s: lease 16 has %q, want %q", step, got, want16)
		}
		if got := leases.Keys(17); !slices.Equal(got, want17) {
			t.Fatalf("%s: lease 17 has %q, want %q", step, got, want17)
		}
	}
	exec := func(req any) {
		t.Helper()
		if _, err := Exec(s, req); err != nil {
			t.Fatalf("%v: %v", req, err)
		}
	}
	exec(withLeaseReq("a", 16))
	expect("put with lease", []string{"a"}, nil)
	calls := leases.Calls()
	exec(withLeaseReq("a", 16))
	if leases.Calls() != calls {
		t.Fatal("a put keeping the same lease called the lease table")
	}
	exec(withLeaseReq("a", 17))
	expect("lease changed", nil, []string{"a"})
	exec(&pb.PutRequest{Key: []byte("a"), Value: []byte("w"), IgnoreLease: true})
	expect("ignore_lease", nil, []string{"a"})
	exec(withLeaseReq("b", 16))
	exec(del("b"))
	expect("leased key deleted", nil, []string{"a"})
	exec(txn(nil, ops(OpPut(withLeaseReq("c", 16)), OpPut(withLeaseReq("d", 16))), nil))
	exec(delSpan("d", "e"))
	exec(withLeaseReq("a", 0))
	expect("lease removed, txn", []string{"c"}, nil)

	// Open attaches the live leased keys.
	s.Close()
	leases = NewLeases(16, 17)
	s = open(t, b, kvstore.Options{Leases: leases})
	expect("after reopen", []string{"c"}, nil)

	// Without a lease table no lease exists.
	bare := open(t, newBackend(t), kvstore.Options{})
	if _, err := Exec(bare, withLeaseReq("a", 16)); !errors.Is(err, kvstore.ErrLeaseNotFound) {
		t.Fatalf("put with a lease and no lease table: %v, want ErrLeaseNotFound", err)
	}
}

func testTxnWrite(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s := open(t, newBackend(t), kvstore.Options{})
	tw := s.Write()
	if tw.Changed() {
		t.Fatal("new TxnWrite reports changes")
	}
	if n, rev := tw.DeleteRange([]byte("a"), nil); n != 0 || rev != 1 {
		t.Fatalf("delete of nothing = %d, %d; want 0, 1", n, rev)
	}
	if rev := tw.Put([]byte("a"), []byte("1"), 0); rev != 2 {
		t.Fatalf("put revision %d, want 2", rev)
	}
	tw.Put([]byte("b"), []byte("1"), 0)
	if n, rev := tw.DeleteRange([]byte("a"), []byte{}); n != 2 || rev != 2 {
		t.Fatalf("delete of everything = %d, %d; want 2, 2", n, rev)
	}
	if tw.Rev() != 1 || !tw.Changed() {
		t.Fatalf("TxnWrite Rev %d Changed %v, want 1 true", tw.Rev(), tw.Changed())
	}
	tw.End()
	empty := s.Write()
	empty.End()
	events := mustCommit(t, s)
	if s.Rev() != 2 {
		t.Fatalf("store revision %d after one write transaction, want 2", s.Rev())
	}
	want := []mvccpb.Event{
		{Type: mvccpb.PUT, Kv: kv("a", "1", 2, 2, 1)},
		{Type: mvccpb.PUT, Kv: kv("b", "1", 2, 2, 1)},
		{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 2}},
		{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("b"), ModRevision: 2}},
	}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Fatalf("events:\n got %v\nwant %v", events, want)
	}
	mustRange(t, s, at(all(), 1), rangeResp(2, 0, false))
	mustRange(t, s, all(), rangeResp(2, 0, false))
}

func testPhysicalCompaction(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s := open(t, newBackend(t), kvstore.Options{})
	// revisionRecords counts the MVCC records the backend holds.
	revisionRecords := func() int {
		t.Helper()
		v := s.SnapshotView()
		defer v.Release()
		n := 0
		if err := v.Ascend([]byte("r"), []byte("s"), func(k, v []byte) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 50 {
		RunSteps(t, s, []Step{ok(put("k", fmt.Sprint(i)), putResp(int64(i+2), nil))})
	}
	RunSteps(t, s, []Step{
		ok(put("other", "x"), putResp(52, nil)),
		ok(del("other"), delResp(53, 1)),
	})
	if n := revisionRecords(); n != 52 {
		t.Fatalf("%d records before compaction, want 52", n)
	}
	RunSteps(t, s, []Step{ok(compact(30), compactResp(53))})
	if n := revisionRecords(); n != 24 { // k at 30..51, other put and tombstone
		t.Fatalf("%d records after compacting at 30, want 24", n)
	}
	RunSteps(t, s, []Step{ok(compact(53), compactResp(53))})
	if n := revisionRecords(); n != 2 { // k at 51, the tombstone at exactly 53
		t.Fatalf("%d records after compacting at 53, want 2", n)
	}
	RunSteps(t, s, []Step{
		ok(put("k", "last"), putResp(54, nil)),
		ok(compact(54), compactResp(54)),
	})
	if n := revisionRecords(); n != 1 {
		t.Fatalf("%d records after compacting at 54, want 1", n)
	}
}
