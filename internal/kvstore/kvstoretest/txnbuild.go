package kvstoretest

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// The request ops and compares of a transaction, exported for the other
// suites that write transactions by hand (test/e2e) so that each is
// written once.

// OpRange, OpPut, OpDel and OpTxn wrap a request as one of a
// transaction's operations.
func OpRange(r *pb.RangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
}

// OpPut wraps a put.
func OpPut(r *pb.PutRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: r}}
}

// OpDel wraps a delete.
func OpDel(r *pb.DeleteRangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: r}}
}

// OpTxn wraps a nested transaction.
func OpTxn(r *pb.TxnRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: r}}
}

// CmpVersion, CmpCreate, CmpMod, CmpValue and CmpLease compare key's
// version, create revision, mod revision, value or lease with v.
func CmpVersion(key string, r pb.Compare_CompareResult, v int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_VERSION, Result: r, TargetUnion: &pb.Compare_Version{Version: v}}
}

// CmpCreate compares key's create revision.
func CmpCreate(key string, r pb.Compare_CompareResult, v int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: r, TargetUnion: &pb.Compare_CreateRevision{CreateRevision: v}}
}

// CmpMod compares key's mod revision.
func CmpMod(key string, r pb.Compare_CompareResult, v int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_MOD, Result: r, TargetUnion: &pb.Compare_ModRevision{ModRevision: v}}
}

// CmpValue compares key's value.
func CmpValue(key string, r pb.Compare_CompareResult, v string) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_VALUE, Result: r, TargetUnion: &pb.Compare_Value{Value: []byte(v)}}
}

// CmpLease compares key's lease.
func CmpLease(key string, r pb.Compare_CompareResult, v int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_LEASE, Result: r, TargetUnion: &pb.Compare_Lease{Lease: v}}
}
