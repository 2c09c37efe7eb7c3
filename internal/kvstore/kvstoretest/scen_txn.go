package kvstoretest

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

func txnCompares() Scenario {
	const lease = 0x10
	a := func() *mvccpb.KeyValue { return kv("a", "1", 2, 2, 1) }
	b := func() *mvccpb.KeyValue { return kv("b", "3", 3, 4, 2) }
	// check runs the compares; the response tells which branch ran.
	check := func(c ...*pb.Compare) *pb.TxnRequest {
		return txn(c, ops(OpRange(get("a"))), ops(OpRange(get("b"))))
	}
	yes := func() *pb.TxnResponse { return txnResp(5, true, res(resRange(found(5, a())))) }
	no := func() *pb.TxnResponse { return txnResp(5, false, res(resRange(found(5, b())))) }
	return Scenario{Name: "TxnCompares", Leases: []int64{lease}, Steps: []Step{
		ok(put("a", "1"), putResp(2, nil)),
		ok(put("b", "2"), putResp(3, nil)),
		ok(put("b", "3"), putResp(4, nil)),
		ok(&pb.PutRequest{Key: []byte("c"), Lease: lease}, putResp(5, nil)),
		ok(check(CmpVersion("b", eq, 2)), yes()),
		ok(check(CmpVersion("b", gt, 1)), yes()),
		ok(check(CmpVersion("b", lt, 2)), no()),
		ok(check(CmpVersion("b", ne, 2)), no()),
		ok(check(CmpCreate("b", eq, 3)), yes()),
		ok(check(CmpCreate("b", gt, 3)), no()),
		ok(check(CmpMod("b", eq, 4)), yes()),
		ok(check(CmpMod("b", lt, 4)), no()),
		ok(check(CmpMod("b", ne, 3)), yes()),
		ok(check(CmpValue("a", eq, "1")), yes()),
		ok(check(CmpValue("a", gt, "0")), yes()),
		ok(check(CmpValue("a", lt, "1")), no()),
		ok(check(CmpValue("a", ne, "1")), no()),
		ok(check(CmpValue("c", eq, "")), yes()),
		// A value compare on a missing key always fails.
		ok(check(CmpValue("zz", eq, "")), no()),
		ok(check(CmpValue("zz", ne, "x")), no()),
		// Other targets compare a missing key as all zero.
		ok(check(CmpVersion("zz", eq, 0)), yes()),
		ok(check(CmpCreate("zz", eq, 0)), yes()),
		ok(check(CmpMod("zz", lt, 1)), yes()),
		ok(check(CmpLease("zz", eq, 0)), yes()),
		ok(check(CmpLease("c", eq, lease)), yes()),
		ok(check(CmpLease("c", gt, 0)), yes()),
		ok(check(CmpLease("a", eq, 0)), yes()),
		ok(check(CmpLease("a", ne, 0)), no()),
		// Over a range every key must satisfy the compare.
		ok(check(over(CmpVersion("a", gt, 0), "c")), yes()),
		ok(check(over(CmpVersion("a", eq, 1), "c")), no()),
		ok(check(over(CmpValue("x", eq, ""), "y")), no()),
		ok(check(over(CmpVersion("x", eq, 0), "y")), yes()),
		ok(check(over(CmpMod("b", gt, 3), "\x00")), yes()),
		ok(check(CmpVersion("a", eq, 1), CmpVersion("b", eq, 1)), no()),
		ok(check(CmpVersion("a", eq, 1), CmpVersion("b", eq, 2), CmpValue("a", eq, "1")), yes()),
		// An unknown result holds; a target value of the wrong kind is 0.
		ok(check(&pb.Compare{Key: []byte("a"), Target: pb.Compare_VERSION, Result: 9, TargetUnion: &pb.Compare_Version{Version: 100}}), yes()),
		ok(check(&pb.Compare{Key: []byte("a"), Target: pb.Compare_VERSION, Result: gt, TargetUnion: &pb.Compare_Value{Value: []byte("5")}}), yes()),
		ok(check(), yes()),
		ok(txn(nil, nil, nil), txnResp(5, true, nil)),
		ok(txn(cmps(CmpVersion("a", eq, 9)), nil, nil), txnResp(5, false, nil)),
		fail(check(CmpVersion("", eq, 0)), kvstore.ErrEmptyKey),
	}}
}

func txnWrites() Scenario {
	const lease, missing = 0x10, 0x99
	return Scenario{Name: "TxnWrites", Leases: []int64{lease}, Steps: []Step{
		ok(put("a", "1"), putResp(2, nil)),
		ok(txn(cmps(CmpVersion("a", eq, 1)),
			ops(OpPut(put("a", "2")), OpPut(put("b", "1")), OpRange(get("a")), OpRange(all())),
			ops(OpPut(put("z", "1")))),
			txnResp(3, true, res(resPut(putResp(3, nil)), resPut(putResp(3, nil)),
				resRange(found(3, kv("a", "2", 2, 3, 2))),
				resRange(found(3, kv("a", "2", 2, 3, 2), kv("b", "1", 3, 3, 1)))))),
		ok(txn(cmps(CmpVersion("a", eq, 5)),
			ops(OpPut(put("z", "1"))),
			ops(OpDel(&pb.DeleteRangeRequest{Key: []byte("a"), PrevKv: true}), OpPut(put("c", "1")), OpRange(all()))),
			txnResp(4, false, res(resDel(delResp(4, 1, kv("a", "2", 2, 3, 2))), resPut(putResp(4, nil)),
				resRange(found(4, kv("b", "1", 3, 3, 1), kv("c", "1", 4, 4, 1)))))),
		// Without writes the revision stays.
		ok(txn(nil, ops(OpRange(get("a"))), nil), txnResp(4, true, res(resRange(rangeResp(4, 0, false))))),
		ok(txn(nil, ops(OpDel(del("zz"))), nil), txnResp(4, true, res(resDel(delResp(4, 0))))),
		// A delete reports the txn's revision so far.
		ok(txn(nil, ops(OpDel(del("zz")), OpPut(put("d", "1"))), nil),
			txnResp(5, true, res(resDel(delResp(4, 0)), resPut(putResp(5, nil))))),
		ok(txn(nil, ops(OpPut(put("e", "1")), OpDel(del("zz"))), nil),
			txnResp(6, true, res(resPut(putResp(6, nil)), resDel(delResp(6, 0))))),
		ok(txn(nil, ops(OpRange(get("e")), OpPut(put("e", "2")), OpRange(get("e"))), nil),
			txnResp(7, true, res(resRange(found(6, kv("e", "1", 6, 6, 1))), resPut(putResp(7, nil)),
				resRange(found(7, kv("e", "2", 6, 7, 2)))))),
		// Nested compares are evaluated before anything runs: the second
		// nested txn sees c = "1" although the first one wrote "2".
		ok(txn(cmps(CmpValue("b", eq, "1")),
			ops(OpTxn(txn(cmps(CmpVersion("c", eq, 1)), ops(OpPut(put("c", "2"))), ops(OpPut(put("c", "3"))))),
				OpTxn(txn(cmps(CmpValue("c", eq, "2")), ops(OpRange(get("a"))), ops(OpRange(get("c")))))),
			nil),
			txnResp(8, true, res(
				resTxn(txnResp(0, true, res(resPut(putResp(8, nil))))),
				resTxn(txnResp(0, false, res(resRange(found(8, kv("c", "2", 4, 8, 2))))))))),
		ok(txn(nil, ops(OpTxn(txn(cmps(CmpVersion("c", eq, 2)), ops(OpRange(get("c"))), nil))), nil),
			txnResp(8, true, res(resTxn(txnResp(0, true, res(resRange(found(8, kv("c", "2", 4, 8, 2))))))))),
		fail(txn(nil, ops(OpPut(put("x", "1")), OpPut(put("x", "2"))), nil), kvstore.ErrDuplicateKey),
		fail(txn(nil, nil, ops(OpPut(put("x", "1")), OpPut(put("x", "2")))), kvstore.ErrDuplicateKey),
		fail(txn(nil, ops(OpPut(put("x", "1")), OpDel(del("x"))), nil), kvstore.ErrDuplicateKey),
		fail(txn(nil, ops(OpDel(delSpan("a", "c")), OpPut(put("b", "1"))), nil), kvstore.ErrDuplicateKey),
		fail(txn(nil, ops(OpTxn(txn(nil, ops(OpPut(put("x", "1"))), nil)), OpPut(put("x", "2"))), nil), kvstore.ErrDuplicateKey),
		fail(txn(nil, ops(OpTxn(txn(nil, ops(OpDel(del("x"))), nil)), OpPut(put("x", "2"))), nil), kvstore.ErrDuplicateKey),
		fail(txn(nil, ops(OpDel(del("x")), OpTxn(txn(nil, nil, ops(OpPut(put("x", "2")))))), nil), kvstore.ErrDuplicateKey),
		// Only one branch of a nested txn runs: both may put one key.
		ok(txn(nil, ops(OpTxn(txn(cmps(CmpVersion("x", eq, 0)), ops(OpPut(put("x", "then"))), ops(OpPut(put("x", "else")))))), nil),
			txnResp(9, true, res(resTxn(txnResp(0, true, res(resPut(putResp(9, nil)))))))),
		// etcd's duplicate check does not see a delete to the end of the
		// key space ("\x00"): the put runs after it.
		ok(txn(nil, ops(OpDel(delSpan("x", "\x00")), OpPut(put("y", "1"))), nil),
			txnResp(10, true, res(resDel(delResp(10, 1)), resPut(putResp(10, nil))))),
		fail(txn(nil, ops(OpPut(&pb.PutRequest{Key: []byte("zz"), IgnoreValue: true})), nil), kvstore.ErrKeyNotFound),
		fail(txn(nil, ops(OpPut(&pb.PutRequest{Key: []byte("f"), Lease: missing})), nil), kvstore.ErrLeaseNotFound),
		fail(txn(nil, ops(OpPut(put("f", "1")), OpRange(at(get("a"), 100))), nil), kvstore.ErrFutureRev),
		ok(get("f"), rangeResp(10, 0, false)),
		// Only the branch taken is checked.
		ok(txn(cmps(CmpVersion("b", eq, 1)), ops(OpRange(get("b"))), ops(OpRange(at(get("a"), 100)))),
			txnResp(10, true, res(resRange(found(10, kv("b", "1", 3, 3, 1)))))),
		ok(txn(nil, ops(OpPut(&pb.PutRequest{Key: []byte("g"), Value: []byte("1"), Lease: lease})), nil),
			txnResp(11, true, res(resPut(putResp(11, nil))))),
		ok(all(), found(11, kv("b", "1", 3, 3, 1), kv("c", "2", 4, 8, 2), kv("d", "1", 5, 5, 1),
			kv("e", "2", 6, 7, 2), withLease(kv("g", "1", 11, 11, 1), lease), kv("y", "1", 10, 10, 1))),
	}}
}

func txnLimits() Scenario {
	ranges := func(n int) []*pb.RequestOp {
		var o []*pb.RequestOp
		for range n {
			o = append(o, OpRange(get("a")))
		}
		return o
	}
	rangeResults := func(n int) []*pb.ResponseOp {
		var r []*pb.ResponseOp
		for range n {
			r = append(r, resRange(found(2, kv("a", "1", 2, 2, 1))))
		}
		return r
	}
	var tooManyCmps []*pb.Compare
	for range MaxTxnOps + 1 {
		tooManyCmps = append(tooManyCmps, CmpVersion("a", eq, 1))
	}
	// Nested txns get what the enclosing level leaves of MaxTxnOps.
	nested := func(outer, inner int) *pb.TxnRequest {
		return txn(nil, append(ranges(outer-1), OpTxn(txn(nil, ranges(inner), nil))), nil)
	}
	return Scenario{Name: "TxnLimits", Steps: []Step{
		ok(put("a", "1"), putResp(2, nil)),
		ok(txn(nil, ranges(MaxTxnOps), nil), txnResp(2, true, rangeResults(MaxTxnOps))),
		fail(txn(nil, ranges(MaxTxnOps+1), nil), kvstore.ErrTooManyOps),
		fail(txn(nil, nil, ranges(MaxTxnOps+1)), kvstore.ErrTooManyOps),
		fail(txn(tooManyCmps, nil, nil), kvstore.ErrTooManyOps),
		ok(nested(10, 6), txnResp(2, true, append(rangeResults(9), resTxn(txnResp(0, true, rangeResults(6)))))),
		fail(nested(10, 7), kvstore.ErrTooManyOps),
		fail(txn(nil, ops(OpPut(put("", "v"))), nil), kvstore.ErrEmptyKey),
		fail(txn(nil, ops(OpDel(del(""))), nil), kvstore.ErrEmptyKey),
		fail(txn(nil, ops(OpRange(&pb.RangeRequest{Key: []byte("a"), SortOrder: 9})), nil), kvstore.ErrInvalidSortOption),
		fail(txn(nil, ops(OpPut(&pb.PutRequest{Key: []byte("a"), Value: []byte("v"), IgnoreValue: true})), nil), kvstore.ErrValueProvided),
		fail(txn(nil, ops(&pb.RequestOp{}), nil), kvstore.ErrKeyNotFound),
		fail(txn(nil, ops(OpTxn(txn(nil, nil, ops(&pb.RequestOp{})))), nil), kvstore.ErrKeyNotFound),
		ok(get("a"), found(2, kv("a", "1", 2, 2, 1))),
	}}
}

func txnIgnoreAfterDelete() Scenario {
	return Scenario{
		Name:      "TxnIgnoreValueAfterDelete",
		Deviation: "etcd panics applying this txn (its duplicate check misses deletes to the end of the key space)",
		Steps: []Step{
			ok(put("a", "1"), putResp(2, nil)),
			fail(txn(nil, ops(OpDel(delSpan("a", "\x00")), OpPut(&pb.PutRequest{Key: []byte("a"), IgnoreValue: true})), nil), kvstore.ErrKeyNotFound),
			fail(txn(nil, ops(OpTxn(txn(nil, ops(OpDel(delSpan("0", "\x00"))), nil)), OpPut(&pb.PutRequest{Key: []byte("a"), IgnoreLease: true})), nil), kvstore.ErrKeyNotFound),
			ok(all(), found(2, kv("a", "1", 2, 2, 1))),
		},
	}
}

func compactionOfRecreatedKey() Scenario {
	return Scenario{
		Name: "CompactionOfKeyRecreatedInTxn",
		Deviation: "etcd's compaction at the revision of a txn that deleted and re-created a key " +
			"removes the new record but keeps it in its index, then dies reading it",
		Steps: []Step{
			ok(put("b", "1"), putResp(2, nil)),
			ok(txn(nil, ops(OpDel(delSpan("a", "\x00")), OpPut(put("b", "2"))), nil),
				txnResp(3, true, res(resDel(delResp(3, 1)), resPut(putResp(3, nil))))),
			ok(compact(3), compactResp(3)),
			ok(get("b"), found(3, kv("b", "2", 3, 3, 1))),
			ok(at(all(), 3), found(3, kv("b", "2", 3, 3, 1))),
		},
	}
}

func compaction() Scenario {
	return Scenario{Name: "Compaction", Steps: []Step{
		ok(put("a", "1"), putResp(2, nil)),
		ok(put("a", "2"), putResp(3, nil)),
		ok(put("b", "1"), putResp(4, nil)),
		ok(del("a"), delResp(5, 1)),
		ok(put("c", "1"), putResp(6, nil)),
		ok(put("a", "3"), putResp(7, nil)),
		ok(compact(3), compactResp(7)),
		fail(at(get("a"), 2), kvstore.ErrCompacted),
		ok(at(get("a"), 3), found(7, kv("a", "2", 2, 3, 2))),
		ok(at(get("a"), 4), found(7, kv("a", "2", 2, 3, 2))),
		ok(at(get("a"), 5), rangeResp(7, 0, false)),
		fail(compact(3), kvstore.ErrCompacted),
		fail(compact(2), kvstore.ErrCompacted),
		fail(compact(8), kvstore.ErrFutureRev),
		ok(compact(5), compactResp(7)),
		fail(at(get("a"), 4), kvstore.ErrCompacted),
		ok(at(get("a"), 5), rangeResp(7, 0, false)),
		ok(at(all(), 5), found(7, kv("b", "1", 4, 4, 1))),
		ok(at(get("a"), 7), found(7, kv("a", "3", 7, 7, 1))),
		fail(txn(nil, ops(OpRange(at(get("a"), 4))), nil), kvstore.ErrCompacted),
		fail(txn(nil, ops(OpPut(put("d", "1")), OpRange(at(get("a"), 4))), nil), kvstore.ErrCompacted),
		ok(&pb.RangeRequest{Key: []byte("\x00"), RangeEnd: []byte("\x00"), CountOnly: true}, rangeResp(7, 3, false)),
		ok(compact(7), compactResp(7)),
		ok(at(all(), 7), found(7, kv("a", "3", 7, 7, 1), kv("b", "1", 4, 4, 1), kv("c", "1", 6, 6, 1))),
		ok(put("a", "4"), putResp(8, nil)),
		ok(at(get("a"), 7), found(8, kv("a", "3", 7, 7, 1))),
		ok(compact(8), compactResp(8)),
		ok(get("a"), found(8, kv("a", "4", 7, 8, 2))),
	}}
}

func compactionEmptyStore() Scenario {
	return Scenario{Name: "CompactionEmptyStore", Steps: []Step{
		ok(compact(0), compactResp(1)),
		fail(compact(0), kvstore.ErrCompacted),
		ok(compact(1), compactResp(1)),
		fail(compact(2), kvstore.ErrFutureRev),
		ok(get("a"), rangeResp(1, 0, false)),
		ok(at(get("a"), 1), rangeResp(1, 0, false)),
		ok(put("a", "1"), putResp(2, nil)),
		ok(at(get("a"), 1), rangeResp(2, 0, false)),
	}}
}

func compactionTombstone() Scenario {
	return Scenario{Name: "CompactionAtTombstone", Steps: []Step{
		ok(put("a", "1"), putResp(2, nil)),
		ok(put("b", "1"), putResp(3, nil)),
		ok(del("a"), delResp(4, 1)),
		ok(compact(4), compactResp(4)),
		ok(at(all(), 4), found(4, kv("b", "1", 3, 3, 1))),
		ok(put("a", "2"), putResp(5, nil)),
		ok(get("a"), found(5, kv("a", "2", 5, 5, 1))),
		ok(compact(5), compactResp(5)),
		ok(at(all(), 5), found(5, kv("a", "2", 5, 5, 1), kv("b", "1", 3, 3, 1))),
		ok(delSpan("a", "c"), delResp(6, 2)),
		ok(compact(6), compactResp(6)),
		ok(all(), rangeResp(6, 0, false)),
		ok(put("b", "2"), putResp(7, nil)),
		ok(all(), found(7, kv("b", "2", 7, 7, 1))),
	}}
}
