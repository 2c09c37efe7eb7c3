package e2e

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
	"github.com/metastore-io/metastore/test/framework"
)

const (
	eq = pb.Compare_EQUAL
	ne = pb.Compare_NOT_EQUAL
	gt = pb.Compare_GREATER
	lt = pb.Compare_LESS
)

// requireBranch checks which branch a compare-only txn took: the success
// branch reads "k", the failure branch reads "other".
func requireBranch(t *testing.T, name string, resp *pb.TxnResponse, wantSucceeded bool) {
	t.Helper()
	if resp.Succeeded != wantSucceeded {
		t.Errorf("%s: succeeded=%v, want %v", name, resp.Succeeded, wantSucceeded)
		return
	}
	wantKey := "other"
	if wantSucceeded {
		wantKey = "k"
	}
	if len(resp.Responses) != 1 {
		t.Errorf("%s: %d responses, want 1", name, len(resp.Responses))
		return
	}
	if got := keysOf(resp.Responses[0].GetResponseRange().GetKvs()); !equalStrings(got, []string{wantKey}) {
		t.Errorf("%s: branch read %q, want %q", name, got, wantKey)
	}
}

func TestTxnCompare(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	// k: version 2, create 2, mod 3, value "v2", no lease.
	mustPut(ctx, t, s.cli, "k", "v1")    // rev 2
	mustPut(ctx, t, s.cli, "k", "v2")    // rev 3
	mustPut(ctx, t, s.cli, "other", "o") // rev 4
	const head = 4

	tests := []struct {
		cmps []*pb.Compare
		want bool
	}{
		{[]*pb.Compare{kvstoretest.CmpVersion("k", eq, 2)}, true},
		{[]*pb.Compare{kvstoretest.CmpVersion("k", eq, 1)}, false},
		{[]*pb.Compare{kvstoretest.CmpVersion("k", ne, 1)}, true},
		{[]*pb.Compare{kvstoretest.CmpVersion("k", ne, 2)}, false},
		{[]*pb.Compare{kvstoretest.CmpVersion("k", gt, 1)}, true},
		{[]*pb.Compare{kvstoretest.CmpVersion("k", gt, 2)}, false},
		{[]*pb.Compare{kvstoretest.CmpVersion("k", lt, 3)}, true},
		{[]*pb.Compare{kvstoretest.CmpVersion("k", lt, 2)}, false},

		{[]*pb.Compare{kvstoretest.CmpCreate("k", eq, 2)}, true},
		{[]*pb.Compare{kvstoretest.CmpCreate("k", eq, 3)}, false},
		{[]*pb.Compare{kvstoretest.CmpCreate("k", ne, 3)}, true},
		{[]*pb.Compare{kvstoretest.CmpCreate("k", ne, 2)}, false},
		{[]*pb.Compare{kvstoretest.CmpCreate("k", gt, 1)}, true},
		{[]*pb.Compare{kvstoretest.CmpCreate("k", gt, 2)}, false},
		{[]*pb.Compare{kvstoretest.CmpCreate("k", lt, 3)}, true},
		{[]*pb.Compare{kvstoretest.CmpCreate("k", lt, 2)}, false},

		{[]*pb.Compare{kvstoretest.CmpMod("k", eq, 3)}, true},
		{[]*pb.Compare{kvstoretest.CmpMod("k", eq, 2)}, false},
		{[]*pb.Compare{kvstoretest.CmpMod("k", ne, 2)}, true},
		{[]*pb.Compare{kvstoretest.CmpMod("k", ne, 3)}, false},
		{[]*pb.Compare{kvstoretest.CmpMod("k", gt, 2)}, true},
		{[]*pb.Compare{kvstoretest.CmpMod("k", gt, 3)}, false},
		{[]*pb.Compare{kvstoretest.CmpMod("k", lt, 4)}, true},
		{[]*pb.Compare{kvstoretest.CmpMod("k", lt, 3)}, false},

		{[]*pb.Compare{kvstoretest.CmpValue("k", eq, "v2")}, true},
		{[]*pb.Compare{kvstoretest.CmpValue("k", eq, "v1")}, false},
		{[]*pb.Compare{kvstoretest.CmpValue("k", ne, "v1")}, true},
		{[]*pb.Compare{kvstoretest.CmpValue("k", ne, "v2")}, false},
		{[]*pb.Compare{kvstoretest.CmpValue("k", gt, "v1")}, true},
		{[]*pb.Compare{kvstoretest.CmpValue("k", gt, "v2")}, false},
		{[]*pb.Compare{kvstoretest.CmpValue("k", lt, "v3")}, true},
		{[]*pb.Compare{kvstoretest.CmpValue("k", lt, "v2")}, false},
		{[]*pb.Compare{kvstoretest.CmpValue("k", gt, "v")}, true}, // a proper prefix sorts first

		{[]*pb.Compare{kvstoretest.CmpLease("k", eq, 0)}, true},
		{[]*pb.Compare{kvstoretest.CmpLease("k", eq, 1)}, false},
		{[]*pb.Compare{kvstoretest.CmpLease("k", ne, 1)}, true},
		{[]*pb.Compare{kvstoretest.CmpLease("k", ne, 0)}, false},
		{[]*pb.Compare{kvstoretest.CmpLease("k", gt, -1)}, true},
		{[]*pb.Compare{kvstoretest.CmpLease("k", gt, 0)}, false},
		{[]*pb.Compare{kvstoretest.CmpLease("k", lt, 1)}, true},
		{[]*pb.Compare{kvstoretest.CmpLease("k", lt, 0)}, false},

		// A missing key compares as all-zero fields, except that a value
		// compare on a missing key always fails.
		{[]*pb.Compare{kvstoretest.CmpVersion("missing", eq, 0)}, true},
		{[]*pb.Compare{kvstoretest.CmpVersion("missing", gt, 0)}, false},
		{[]*pb.Compare{kvstoretest.CmpCreate("missing", eq, 0)}, true},
		{[]*pb.Compare{kvstoretest.CmpMod("missing", lt, 1)}, true},
		{[]*pb.Compare{kvstoretest.CmpLease("missing", eq, 0)}, true},
		{[]*pb.Compare{kvstoretest.CmpValue("missing", eq, "")}, false},
		{[]*pb.Compare{kvstoretest.CmpValue("missing", ne, "x")}, false},
		{[]*pb.Compare{kvstoretest.CmpValue("missing", lt, "z")}, false},

		// Compares are ANDed; no compares at all succeed.
		{[]*pb.Compare{kvstoretest.CmpVersion("k", eq, 2), kvstoretest.CmpValue("k", eq, "v2")}, true},
		{[]*pb.Compare{kvstoretest.CmpVersion("k", eq, 2), kvstoretest.CmpValue("k", eq, "v1")}, false},
		{[]*pb.Compare{kvstoretest.CmpValue("k", eq, "v1"), kvstoretest.CmpVersion("k", eq, 2)}, false},
		{nil, true},
	}
	for i, tc := range tests {
		name := fmt.Sprintf("case %d %v", i, tc.cmps)
		resp := mustTxn(ctx, t, s.kv, &pb.TxnRequest{
			Compare: tc.cmps,
			Success: []*pb.RequestOp{rangeOp("k")},
			Failure: []*pb.RequestOp{rangeOp("other")},
		})
		requireBranch(t, name, resp, tc.want)
		// A read-only txn does not move the revision.
		requireHeader(t, resp.Header, head)
	}

	// clientv3's compare builders produce the same requests.
	ok, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.Version("k"), "=", 2),
		clientv3.Compare(clientv3.CreateRevision("k"), "<", 3),
		clientv3.Compare(clientv3.ModRevision("k"), ">", 2),
		clientv3.Compare(clientv3.Value("k"), "!=", "v1"),
		clientv3.Compare(clientv3.LeaseValue("k"), "=", clientv3.NoLease),
	).Then(clientv3.OpGet("k")).Commit()
	if err != nil {
		t.Fatalf("clientv3 txn: %v", err)
	}
	if !ok.Succeeded {
		t.Fatal("clientv3 txn: compares failed, want success")
	}
}

func TestTxnCompareRange(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	mustPut(ctx, t, s.cli, "r/a", "1") // rev 2
	mustPut(ctx, t, s.cli, "r/b", "1") // rev 3
	mustPut(ctx, t, s.cli, "r/b", "2") // rev 4
	mustPut(ctx, t, s.cli, "r/c", "3") // rev 5
	mustPut(ctx, t, s.cli, "k", "k")   // rev 6
	mustPut(ctx, t, s.cli, "other", "o")

	withRange := func(c *pb.Compare, end string) *pb.Compare {
		c.RangeEnd = []byte(end)
		return c
	}
	tests := []struct {
		name string
		cmp  *pb.Compare
		want bool
	}{
		// A range compare holds only if it holds for every key in the range.
		{"all versions > 0", withRange(kvstoretest.CmpVersion("r/", gt, 0), "r0"), true},
		{"all versions = 1", withRange(kvstoretest.CmpVersion("r/", eq, 1), "r0"), false},
		{"versions = 1 in [r/a, r/b)", withRange(kvstoretest.CmpVersion("r/a", eq, 1), "r/b"), true},
		{"all mod < 6", withRange(kvstoretest.CmpMod("r/", lt, 6), "r0"), true},
		{"all mod < 5", withRange(kvstoretest.CmpMod("r/", lt, 5), "r0"), false},
		{"all create > 1", withRange(kvstoretest.CmpCreate("r/", gt, 1), "r0"), true},
		{"all values < 4", withRange(kvstoretest.CmpValue("r/", lt, "4"), "r0"), true},
		{"all values = 1", withRange(kvstoretest.CmpValue("r/", eq, "1"), "r0"), false},
		{"all leases = 0", withRange(kvstoretest.CmpLease("r/", eq, 0), "r0"), true},
		// From-key range: range_end "\x00" covers every key >= "r/b".
		{"from r/b versions > 1", withRange(kvstoretest.CmpVersion("r/b", gt, 1), "\x00"), false},
		{"from r/b mod > 3", withRange(kvstoretest.CmpMod("r/b", gt, 3), "\x00"), true},
		// An empty range behaves like a missing key.
		{"empty range version = 0", withRange(kvstoretest.CmpVersion("x/", eq, 0), "x0"), true},
		{"empty range value = ''", withRange(kvstoretest.CmpValue("x/", eq, ""), "x0"), false},
	}
	for _, tc := range tests {
		resp := mustTxn(ctx, t, s.kv, &pb.TxnRequest{
			Compare: []*pb.Compare{tc.cmp},
			Success: []*pb.RequestOp{rangeOp("k")},
			Failure: []*pb.RequestOp{rangeOp("other")},
		})
		requireBranch(t, tc.name, resp, tc.want)
	}
}

func TestTxnWritesShareOneRevision(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	mustPut(ctx, t, s.cli, "gone", "x") // rev 2

	resp := mustTxn(ctx, t, s.kv, &pb.TxnRequest{Success: []*pb.RequestOp{
		putOp("t/1", "a"),
		putOp("t/2", "b"),
		rangeOp("t/1"), // sees the txn's own write
		deleteOp("gone", ""),
		putOp("t/3", "c"),
	}})
	requireHeader(t, resp.Header, 3)
	if !resp.Succeeded || len(resp.Responses) != 5 {
		t.Fatalf("txn: succeeded=%v responses=%d", resp.Succeeded, len(resp.Responses))
	}
	requireKV(t, resp.Responses[2].GetResponseRange().GetKvs()[0], mvccpb.KeyValue{Key: []byte("t/1"), Value: []byte("a"), CreateRevision: 3, ModRevision: 3, Version: 1})
	if d := resp.Responses[3].GetResponseDeleteRange().GetDeleted(); d != 1 {
		t.Fatalf("txn delete reported %d deleted, want 1", d)
	}
	got := mustGet(ctx, t, s.cli, "t/", clientv3.WithPrefix())
	requireKeys(t, got.Kvs, "t/1", "t/2", "t/3")
	for _, kv := range got.Kvs {
		if kv.ModRevision != 3 || kv.CreateRevision != 3 {
			t.Fatalf("%q: create=%d mod=%d, want both 3", kv.Key, kv.CreateRevision, kv.ModRevision)
		}
	}
	if got := mustGet(ctx, t, s.cli, "gone"); len(got.Kvs) != 0 {
		t.Fatal("key deleted in txn still present")
	}

	// Writing one key twice in a txn is refused, but a put followed by a
	// read of the same key is fine (covered above), and so are the same
	// key in the two branches.
	resp = mustTxn(ctx, t, s.kv, &pb.TxnRequest{
		Compare: []*pb.Compare{kvstoretest.CmpVersion("t/1", eq, 1)},
		Success: []*pb.RequestOp{putOp("t/1", "again")},
		Failure: []*pb.RequestOp{putOp("t/1", "never")},
	})
	requireHeader(t, resp.Header, 4)
	got = mustGet(ctx, t, s.cli, "t/1")
	requireKV(t, got.Kvs[0], mvccpb.KeyValue{Key: []byte("t/1"), Value: []byte("again"), CreateRevision: 3, ModRevision: 4, Version: 2})

	// Txns that change nothing keep the revision: read-only branches, an
	// empty chosen branch, and a delete that matches nothing.
	for name, req := range map[string]*pb.TxnRequest{
		"read-only":             {Success: []*pb.RequestOp{rangeOp("t/1")}, Failure: []*pb.RequestOp{rangeOp("t/2")}},
		"empty failure branch":  {Compare: []*pb.Compare{kvstoretest.CmpVersion("t/1", eq, 100)}, Success: []*pb.RequestOp{putOp("t/9", "x")}},
		"delete of missing key": {Success: []*pb.RequestOp{deleteOp("nothing", "")}},
		"empty txn":             {},
	} {
		resp := mustTxn(ctx, t, s.kv, req)
		if resp.Header.Revision != 4 {
			t.Errorf("%s: revision %d, want 4", name, resp.Header.Revision)
		}
	}
	if rev := currentRevision(ctx, t, s.cli); rev != 4 {
		t.Fatalf("revision %d after no-op txns, want 4", rev)
	}
}

func TestTxnNested(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	mustPut(ctx, t, s.cli, "k", "v") // rev 2

	inner := &pb.TxnRequest{
		Compare: []*pb.Compare{kvstoretest.CmpValue("k", eq, "nope")},
		Success: []*pb.RequestOp{putOp("n/never", "x")},
		Failure: []*pb.RequestOp{putOp("n/2", "b"), rangeOp("n/1")},
	}
	resp := mustTxn(ctx, t, s.kv, &pb.TxnRequest{
		Compare: []*pb.Compare{kvstoretest.CmpVersion("k", eq, 1)},
		Success: []*pb.RequestOp{putOp("n/1", "a"), kvstoretest.OpTxn(inner), rangeOp("n/2")},
		Failure: []*pb.RequestOp{putOp("n/outer-failure", "x")},
	})
	requireHeader(t, resp.Header, 3)
	if !resp.Succeeded || len(resp.Responses) != 3 {
		t.Fatalf("outer txn: succeeded=%v responses=%d, want true and 3", resp.Succeeded, len(resp.Responses))
	}
	innerResp := resp.Responses[1].GetResponseTxn()
	if innerResp == nil || innerResp.Succeeded || len(innerResp.Responses) != 2 {
		t.Fatalf("inner txn response: %v, want failure branch with 2 responses", innerResp)
	}
	// The inner txn sees the outer txn's earlier write, and the outer txn
	// sees the inner one's.
	requireKeys(t, innerResp.Responses[1].GetResponseRange().GetKvs(), "n/1")
	requireKeys(t, resp.Responses[2].GetResponseRange().GetKvs(), "n/2")

	got := mustGet(ctx, t, s.cli, "n/", clientv3.WithPrefix())
	requireKeys(t, got.Kvs, "n/1", "n/2")
	for _, kv := range got.Kvs {
		if kv.ModRevision != 3 {
			t.Fatalf("%q written by nested txn has mod revision %d, want 3", kv.Key, kv.ModRevision)
		}
	}
}

func TestTxnRejected(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	mustPut(ctx, t, s.cli, "k", "v") // rev 2

	ops := func(n int) []*pb.RequestOp {
		out := make([]*pb.RequestOp, n)
		for i := range out {
			out[i] = putOp(fmt.Sprintf("op/%03d", i), "v")
		}
		return out
	}
	cmps := func(n int) []*pb.Compare {
		out := make([]*pb.Compare, n)
		for i := range out {
			out[i] = kvstoretest.CmpVersion("k", gt, 0)
		}
		return out
	}

	// The default --max-txn-ops is 128, counted per branch and for compares.
	resp := mustTxn(ctx, t, s.kv, &pb.TxnRequest{Compare: cmps(128), Success: ops(128)})
	requireHeader(t, resp.Header, 3)
	for name, req := range map[string]*pb.TxnRequest{
		"129 success ops": {Success: ops(129)},
		"129 failure ops": {Failure: ops(129)},
		"129 compares":    {Compare: cmps(129)},
	} {
		_, err := s.kv.Txn(ctx, req)
		t.Run(name, func(t *testing.T) { requireRPCError(t, err, rpctypes.ErrGRPCTooManyOps) })
	}

	for name, req := range map[string]*pb.TxnRequest{
		"put twice":                    {Success: []*pb.RequestOp{putOp("d", "1"), putOp("d", "2")}},
		"put and delete":               {Success: []*pb.RequestOp{putOp("d", "1"), deleteOp("d", "")}},
		"put inside deleted range":     {Success: []*pb.RequestOp{deleteOp("a", "c"), putOp("b", "1")}},
		"duplicate in unchosen branch": {Success: []*pb.RequestOp{putOp("x", "1")}, Failure: []*pb.RequestOp{putOp("d", "1"), putOp("d", "2")}},
		"put in outer and nested txn":  {Success: []*pb.RequestOp{putOp("d", "1"), kvstoretest.OpTxn(&pb.TxnRequest{Success: []*pb.RequestOp{putOp("d", "2")}})}},
	} {
		_, err := s.kv.Txn(ctx, req)
		t.Run(name, func(t *testing.T) { requireRPCError(t, err, rpctypes.ErrGRPCDuplicateKey) })
	}
	// Overlapping deletes are not duplicates.
	resp = mustTxn(ctx, t, s.kv, &pb.TxnRequest{Success: []*pb.RequestOp{deleteOp("op/", "op0"), deleteOp("op/000", "")}})
	requireHeader(t, resp.Header, 4)

	// Checks against the store's state refuse the whole txn.
	_, err := s.kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{putOp("w", "1"),
		{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k"), Revision: 100}}}}})
	requireRPCError(t, err, rpctypes.ErrGRPCFutureRev)
	_, err = s.kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{putOp("w", "1"),
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k2"), Value: []byte("v"), Lease: 0x7777}}}}})
	requireRPCError(t, err, rpctypes.ErrGRPCLeaseNotFound)
	_, err = s.kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{putOp("w", "1"),
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("missing"), IgnoreValue: true}}}}})
	requireRPCError(t, err, rpctypes.ErrGRPCKeyNotFound)

	if rev := currentRevision(ctx, t, s.cli); rev != 4 {
		t.Fatalf("revision %d after rejected txns, want 4", rev)
	}
	if got := mustGet(ctx, t, s.cli, "w"); len(got.Kvs) != 0 {
		t.Fatal("a rejected txn wrote \"w\"")
	}
}
