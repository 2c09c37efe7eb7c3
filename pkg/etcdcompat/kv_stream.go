package etcdcompat

import (
	"context"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/pkg/rangestream"
)

// etcd 3.7 adds RangeStream to the KV service. gRPC takes one
// registration per service name, and etcd 3.6's generated registration
// (pb.RegisterKVServer, which takes a *grpc.Server, so its description
// cannot be captured) has no room for it: the service is described here
// instead, with etcd's five unary methods, by the same names and with
// the same request and response types, and the server-streaming
// RangeStream. TestKVServiceDescMatchesEtcd checks the methods against
// the generated registration.

// kvServiceDesc describes etcd's KV service with RangeStream.
func kvServiceDesc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "etcdserverpb.KV",
		HandlerType: (*pb.KVServer)(nil),
		Methods: []grpc.MethodDesc{
			kvMethod("Range", pb.KVServer.Range),
			kvMethod("Put", pb.KVServer.Put),
			kvMethod("DeleteRange", pb.KVServer.DeleteRange),
			kvMethod("Txn", pb.KVServer.Txn),
			kvMethod("Compact", pb.KVServer.Compact),
		},
		Streams: []grpc.StreamDesc{{
			StreamName:    "RangeStream",
			Handler:       func(srv any, ss grpc.ServerStream) error { return srv.(*kvService).rangeStream(ss) },
			ServerStreams: true,
		}},
		Metadata: "rpc.proto",
	}
}

// kvMethod is a unary method of the KV service: it decodes the request
// and passes it through the interceptors to call, as generated code does,
// except that the call's UnaryServerInfo and handler are made once per
// registered service, not per call as generated code makes them (two
// allocations a request; nothing in the chain changes either).
func kvMethod[Req, Resp any](name string, call func(pb.KVServer, context.Context, *Req) (*Resp, error)) grpc.MethodDesc {
	fullMethod := "/etcdserverpb.KV/" + name
	var bound atomic.Pointer[unaryBinding]
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(Req)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return call(srv.(pb.KVServer), ctx, in)
			}
			b := bound.Load()
			if b == nil || b.info.Server != srv {
				b = &unaryBinding{info: &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}}
				kv := srv.(pb.KVServer)
				b.handler = func(ctx context.Context, req any) (any, error) { return call(kv, ctx, req.(*Req)) }
				bound.Store(b)
			}
			return interceptor(ctx, in, b.info, b.handler)
		},
	}
}

// unaryBinding is what a unary method passes to the interceptors with
// every call to one registered service.
type unaryBinding struct {
	info    *grpc.UnaryServerInfo
	handler grpc.UnaryHandler
}

// The server codec encodes chunks with their own gogoproto-style methods.
var _ gogoMessage = (*rangestream.Response)(nil)

// errRangeStreamUnimplemented is what a member without RangeStream
// answers: gRPC's own status for a method the server does not have.
var errRangeStreamUnimplemented = status.Error(codes.Unimplemented, "unknown method RangeStream for service etcdserverpb.KV")

// rangeStream serves one RangeStream call: the request is validated as
// Range's is; a sort order other than by key is Unimplemented (the
// client is to use Range); each chunk is sent as it is read, with the
// last one's header filled in as Range's is.
func (k *kvService) rangeStream(ss grpc.ServerStream) error {
	r := new(pb.RangeRequest)
	if err := ss.RecvMsg(r); err != nil {
		return err
	}
	if err := kvstore.CheckRange(r); err != nil {
		return ToGRPCError(err)
	}
	sm, ok := k.srv.(RangeStreamMember)
	if !ok {
		return errRangeStreamUnimplemented
	}
	if !kvstore.StreamableSort(r) {
		return ToGRPCError(kvstore.ErrStreamSortOrder)
	}
	err := sm.RangeStream(ss.Context(), r, k.chunkBytes, func(resp *pb.RangeResponse) error {
		k.hdr.fill(resp.Header)
		return ss.SendMsg(&rangestream.Response{RangeResponse: resp})
	})
	return ToGRPCError(err)
}
