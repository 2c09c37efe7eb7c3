package kvstoretest

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Shorthands for writing requests and expected responses in tables.

func ok(req, want any) Step        { return Step{Req: req, Want: want} }
func fail(req any, err error) Step { return Step{Req: req, Err: err} }

func get(key string) *pb.RangeRequest { return &pb.RangeRequest{Key: []byte(key)} }

func span(key, end string) *pb.RangeRequest {
	return &pb.RangeRequest{Key: []byte(key), RangeEnd: []byte(end)}
}

// all is a range over every key.
func all() *pb.RangeRequest { return span("\x00", "\x00") }

func at(r *pb.RangeRequest, rev int64) *pb.RangeRequest { r.Revision = rev; return r }

func put(key, value string) *pb.PutRequest {
	return &pb.PutRequest{Key: []byte(key), Value: []byte(value)}
}

func del(key string) *pb.DeleteRangeRequest { return &pb.DeleteRangeRequest{Key: []byte(key)} }

func delSpan(key, end string) *pb.DeleteRangeRequest {
	return &pb.DeleteRangeRequest{Key: []byte(key), RangeEnd: []byte(end)}
}

func compact(rev int64) *pb.CompactionRequest { return &pb.CompactionRequest{Revision: rev} }

func hdr(rev int64) *pb.ResponseHeader { return &pb.ResponseHeader{Revision: rev} }

func kv(key, value string, create, mod, version int64) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(key), Value: []byte(value), CreateRevision: create, ModRevision: mod, Version: version}
}

func withLease(k *mvccpb.KeyValue, lease int64) *mvccpb.KeyValue { k.Lease = lease; return k }

// noValue is k as keys_only returns it.
func noValue(k *mvccpb.KeyValue) *mvccpb.KeyValue { k.Value = nil; return k }

func rangeResp(rev, count int64, more bool, kvs ...*mvccpb.KeyValue) *pb.RangeResponse {
	return &pb.RangeResponse{Header: hdr(rev), Count: count, More: more, Kvs: kvs}
}

// found is the answer to a range that returns all of kvs.
func found(rev int64, kvs ...*mvccpb.KeyValue) *pb.RangeResponse {
	return rangeResp(rev, int64(len(kvs)), false, kvs...)
}

func putResp(rev int64, prev *mvccpb.KeyValue) *pb.PutResponse {
	return &pb.PutResponse{Header: hdr(rev), PrevKv: prev}
}

func delResp(rev, deleted int64, prev ...*mvccpb.KeyValue) *pb.DeleteRangeResponse {
	return &pb.DeleteRangeResponse{Header: hdr(rev), Deleted: deleted, PrevKvs: prev}
}

func compactResp(rev int64) *pb.CompactionResponse { return &pb.CompactionResponse{Header: hdr(rev)} }

// txn builds a TxnRequest.
func txn(cmps []*pb.Compare, success, failure []*pb.RequestOp) *pb.TxnRequest {
	return &pb.TxnRequest{Compare: cmps, Success: success, Failure: failure}
}

func cmps(c ...*pb.Compare) []*pb.Compare      { return c }
func ops(o ...*pb.RequestOp) []*pb.RequestOp   { return o }
func res(r ...*pb.ResponseOp) []*pb.ResponseOp { return r }

// txnResp is a TxnResponse; nested ones have revision 0 (an empty
// header), as etcd leaves them.
func txnResp(rev int64, succeeded bool, responses []*pb.ResponseOp) *pb.TxnResponse {
	return &pb.TxnResponse{Header: hdr(rev), Succeeded: succeeded, Responses: responses}
}

func resRange(r *pb.RangeResponse) *pb.ResponseOp {
	return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: r}}
}

func resPut(r *pb.PutResponse) *pb.ResponseOp {
	return &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: r}}
}

func resDel(r *pb.DeleteRangeResponse) *pb.ResponseOp {
	return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: r}}
}

func resTxn(r *pb.TxnResponse) *pb.ResponseOp {
	return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: r}}
}

// over makes c a compare over [c.Key, end).
func over(c *pb.Compare, end string) *pb.Compare { c.RangeEnd = []byte(end); return c }

// Compare results, short.
const (
	eq = pb.Compare_EQUAL
	ne = pb.Compare_NOT_EQUAL
	gt = pb.Compare_GREATER
	lt = pb.Compare_LESS
)
