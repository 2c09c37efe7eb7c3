package etcdcompat

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// kvService is etcd's KV service.
type kvService struct {
	pb.UnimplementedKVServer
	srv       Member
	hdr       headerFiller
	maxTxnOps int
	// chunkBytes is RangeStream's target chunk size (kv_stream.go).
	chunkBytes int
}

func (k *kvService) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := kvstore.CheckRange(r); err != nil {
		return nil, ToGRPCError(err)
	}
	resp, err := k.srv.Range(ctx, r)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	k.hdr.fill(resp.Header)
	return resp, nil
}

func (k *kvService) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if err := kvstore.CheckPut(r); err != nil {
		return nil, ToGRPCError(err)
	}
	resp, err := k.srv.Put(ctx, r)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	k.hdr.fill(resp.Header)
	return resp, nil
}

func (k *kvService) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if err := kvstore.CheckDeleteRange(r); err != nil {
		return nil, ToGRPCError(err)
	}
	resp, err := k.srv.DeleteRange(ctx, r)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	k.hdr.fill(resp.Header)
	return resp, nil
}

func (k *kvService) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := kvstore.CheckTxn(r, k.maxTxnOps); err != nil {
		return nil, ToGRPCError(err)
	}
	resp, err := k.srv.Txn(ctx, r)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	k.hdr.fill(resp.Header)
	return resp, nil
}

func (k *kvService) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	resp, err := k.srv.Compact(ctx, r)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	k.hdr.fill(resp.Header)
	return resp, nil
}
