package rangestream

import (
	"context"
	"errors"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// MethodName is the RPC's full name.
const MethodName = "/etcdserverpb.KV/RangeStream"

// streamDesc describes the RPC to grpc.ClientConnInterface.NewStream.
var streamDesc = grpc.StreamDesc{StreamName: "RangeStream", ServerStreams: true}

// Stream is one RangeStream call: Recv returns its chunks in order.
type Stream struct{ cs grpc.ClientStream }

// Open starts a RangeStream call for req on cc (a *grpc.ClientConn, or a
// clientv3.Client's ActiveConnection, which carries its credentials).
// Errors, codes.Unimplemented from a server without the RPC included,
// come from Recv.
func Open(ctx context.Context, cc grpc.ClientConnInterface, req *pb.RangeRequest, opts ...grpc.CallOption) (*Stream, error) {
	desc := streamDesc
	cs, err := cc.NewStream(ctx, &desc, MethodName, opts...)
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(req); err != nil {
		return nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	return &Stream{cs: cs}, nil
}

// Recv returns the next chunk, or io.EOF after the last one.
func (s *Stream) Recv() (*pb.RangeResponse, error) {
	var m Response
	if err := s.cs.RecvMsg(&m); err != nil {
		return nil, err
	}
	if m.RangeResponse == nil {
		return &pb.RangeResponse{}, nil
	}
	return m.RangeResponse, nil
}

// ForEach calls fn with each chunk in order until the stream ends (nil)
// or fails, or fn fails (its error).
func (s *Stream) ForEach(fn func(chunk *pb.RangeResponse) error) error {
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(chunk); err != nil {
			return err
		}
	}
}

// Get calls RangeStream for req and merges the chunks into the response
// the unary Range gives (etcd 3.7's clientv3 RangeStreamToRangeResponse).
func Get(ctx context.Context, cc grpc.ClientConnInterface, req *pb.RangeRequest, opts ...grpc.CallOption) (*pb.RangeResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the call if a chunk fails
	s, err := Open(ctx, cc, req, opts...)
	if err != nil {
		return nil, err
	}
	resp := &pb.RangeResponse{}
	err = s.ForEach(func(chunk *pb.RangeResponse) error {
		Merge(resp, chunk)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
