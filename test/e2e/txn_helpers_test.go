package e2e

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func putOp(key, value string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(key), Value: []byte(value)}}}
}

func rangeOp(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte(key)}}}
}

func deleteOp(key, rangeEnd string) *pb.RequestOp {
	req := &pb.DeleteRangeRequest{Key: []byte(key)}
	if rangeEnd != "" {
		req.RangeEnd = []byte(rangeEnd)
	}
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: req}}
}

func txnOp(txn *pb.TxnRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: txn}}
}

func versionCmp(key string, result pb.Compare_CompareResult, version int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_VERSION, Result: result, TargetUnion: &pb.Compare_Version{Version: version}}
}

func createCmp(key string, result pb.Compare_CompareResult, rev int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: result, TargetUnion: &pb.Compare_CreateRevision{CreateRevision: rev}}
}

func modCmp(key string, result pb.Compare_CompareResult, rev int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_MOD, Result: result, TargetUnion: &pb.Compare_ModRevision{ModRevision: rev}}
}

func valueCmp(key string, result pb.Compare_CompareResult, value string) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_VALUE, Result: result, TargetUnion: &pb.Compare_Value{Value: []byte(value)}}
}

func leaseCmp(key string, result pb.Compare_CompareResult, lease int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_LEASE, Result: result, TargetUnion: &pb.Compare_Lease{Lease: lease}}
}
