package statemachine

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// etcd's quota costs: a put its key, value and 256 bytes; a txn its
// costlier branch (nested txns included); a lease grant 64; the rest 0.
func TestQuotaCost(t *testing.T) {
	put := func(k, v string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
	}
	nested := &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{put("a", "bb")}}}}
	for _, tc := range []struct {
		req  any
		want int
	}{
		{&pb.PutRequest{Key: []byte("k"), Value: []byte("vv")}, 259},
		{&pb.TxnRequest{Success: []*pb.RequestOp{put("k", "v")}, Failure: []*pb.RequestOp{put("kk", "v"), nested}}, 259 + 259},
		{&pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}}}, 0},
		{&pb.LeaseGrantRequest{TTL: 5}, 64},
		{&pb.DeleteRangeRequest{Key: []byte("k")}, 0},
	} {
		if got := QuotaCost(tc.req); got != tc.want {
			t.Errorf("QuotaCost(%v) = %d, want %d", tc.req, got, tc.want)
		}
	}
}
