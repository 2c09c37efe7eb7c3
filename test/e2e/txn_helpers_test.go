package e2e

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
)

// The transaction builders are kvstoretest's; these are the e2e suite's
// shorthands over them.

func putOp(key, value string) *pb.RequestOp {
	return kvstoretest.OpPut(&pb.PutRequest{Key: []byte(key), Value: []byte(value)})
}

func rangeOp(key string) *pb.RequestOp {
	return kvstoretest.OpRange(&pb.RangeRequest{Key: []byte(key)})
}

func deleteOp(key, rangeEnd string) *pb.RequestOp {
	req := &pb.DeleteRangeRequest{Key: []byte(key)}
	if rangeEnd != "" {
		req.RangeEnd = []byte(rangeEnd)
	}
	return kvstoretest.OpDel(req)
}
