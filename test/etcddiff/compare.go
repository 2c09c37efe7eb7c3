package etcddiff

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// requestTimeout bounds one request to the reference etcd.
const requestTimeout = 10 * time.Second

// sameError compares our error, as the gRPC services answer it
// (etcdcompat.ToGRPCError, the production mapping), with etcd's on the
// wire: status code and message.
func sameError(ours, theirs error) bool {
	if ours == nil || theirs == nil {
		return ours == theirs
	}
	a, aok := status.FromError(etcdcompat.ToGRPCError(ours))
	b, bok := status.FromError(theirs)
	return aok && bok && a.Code() == b.Code() && a.Message() == b.Message()
}

// do sends req to etcd and returns its response with the member-specific
// header fields (cluster, member, raft term) zeroed.
func (e *etcd) do(req any) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var (
		resp any
		hdr  *pb.ResponseHeader
		err  error
	)
	switch r := req.(type) {
	case *pb.RangeRequest:
		var rr *pb.RangeResponse
		if rr, err = e.kv.Range(ctx, r); err == nil {
			resp, hdr = rr, rr.Header
		}
	case *pb.PutRequest:
		var pr *pb.PutResponse
		if pr, err = e.kv.Put(ctx, r); err == nil {
			resp, hdr = pr, pr.Header
		}
	case *pb.DeleteRangeRequest:
		var dr *pb.DeleteRangeResponse
		if dr, err = e.kv.DeleteRange(ctx, r); err == nil {
			resp, hdr = dr, dr.Header
		}
	case *pb.TxnRequest:
		var tr *pb.TxnResponse
		if tr, err = e.kv.Txn(ctx, r); err == nil {
			resp, hdr = tr, tr.Header
		}
	case *pb.CompactionRequest:
		var cr *pb.CompactionResponse
		if cr, err = e.kv.Compact(ctx, r); err == nil {
			resp, hdr = cr, cr.Header
		}
	default:
		return nil, fmt.Errorf("etcddiff: unknown request type %T", req)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("etcd did not answer %T: %w", req, err)
		}
		if status.Code(err) == codes.Unavailable {
			select {
			case <-e.exited:
				return nil, fmt.Errorf("etcd died on %T: %w\n%s", req, err, e.logTail())
			case <-time.After(time.Second):
			}
		}
		return nil, err
	}
	if hdr != nil {
		hdr.ClusterId, hdr.MemberId, hdr.RaftTerm = 0, 0, 0
	}
	return resp, nil
}

// decoded returns a copy of req as a gRPC server receives it: encoded and
// decoded again (so that, for example, empty byte fields become nil).
func decoded(req any) (any, error) {
	type message interface {
		Marshal() ([]byte, error)
		Unmarshal([]byte) error
	}
	var out message
	switch req.(type) {
	case *pb.RangeRequest:
		out = &pb.RangeRequest{}
	case *pb.PutRequest:
		out = &pb.PutRequest{}
	case *pb.DeleteRangeRequest:
		out = &pb.DeleteRangeRequest{}
	case *pb.TxnRequest:
		out = &pb.TxnRequest{}
	case *pb.CompactionRequest:
		out = &pb.CompactionRequest{}
	default:
		return nil, fmt.Errorf("etcddiff: unknown request type %T", req)
	}
	data, err := req.(message).Marshal()
	if err != nil {
		return nil, fmt.Errorf("marshal %T: %w", req, err)
	}
	if err := out.Unmarshal(data); err != nil {
		return nil, fmt.Errorf("unmarshal %T: %w", req, err)
	}
	return out, nil
}
