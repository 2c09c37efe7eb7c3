package rangestream_test

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/metastore-io/metastore/pkg/rangestream"
)

// chunks is a stream laid out as a server sends it.
func chunks() []*pb.RangeResponse {
	kv := func(k string, v string) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte(k), Value: []byte(v), CreateRevision: 2, ModRevision: 3, Version: 1}
	}
	return []*pb.RangeResponse{
		{Kvs: []*mvccpb.KeyValue{kv("a", "1"), kv("b", "2")}},
		{Kvs: []*mvccpb.KeyValue{kv("c", string(bytes.Repeat([]byte("x"), 1000)))}},
		{Header: &pb.ResponseHeader{ClusterId: 7, MemberId: 8, Revision: 9, RaftTerm: 2}, Kvs: []*mvccpb.KeyValue{kv("d", "4")}, Count: 10, More: true},
	}
}

// concatMerge merges as protobuf defines it: decoding the concatenation.
func concatMerge(t *testing.T, cs []*pb.RangeResponse) *pb.RangeResponse {
	t.Helper()
	var all []byte
	for _, c := range cs {
		b, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	var m pb.RangeResponse
	if err := m.Unmarshal(all); err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestMergeIsProtoMerge(t *testing.T) {
	got := &pb.RangeResponse{}
	for _, c := range chunks() {
		rangestream.Merge(got, c)
	}
	if want := concatMerge(t, chunks()); got.String() != want.String() {
		t.Fatalf("Merge gave %v, want %v", got, want)
	}
}

func TestResponseRoundTrip(t *testing.T) {
	for _, c := range append(chunks(), &pb.RangeResponse{}) {
		m := &rangestream.Response{RangeResponse: c}
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != m.Size() {
			t.Fatalf("Marshal gave %d bytes, Size says %d", len(b), m.Size())
		}
		var got rangestream.Response
		if err := got.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if got.RangeResponse.String() != c.String() {
			t.Fatalf("round trip gave %v, want %v", got.RangeResponse, c)
		}
	}
	// Unknown fields (a varint 2, a fixed32 3) are skipped.
	b, _ := (&rangestream.Response{RangeResponse: chunks()[0]}).Marshal()
	b = append([]byte{0x10, 0x05}, append(b, 0x1d, 1, 2, 3, 4)...)
	var got rangestream.Response
	if err := got.Unmarshal(b); err != nil || len(got.RangeResponse.Kvs) != 2 {
		t.Fatalf("with unknown fields: %v, %v", got.RangeResponse, err)
	}
	// Truncated input is an error.
	if err := got.Unmarshal(b[:len(b)-2]); err == nil {
		t.Fatal("truncated input decoded")
	}
}

// streamServer serves RangeStream with fixed chunks, or an error.
type streamServer struct{ err error }

func (s streamServer) serve(_ any, ss grpc.ServerStream) error {
	var req pb.RangeRequest
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	if string(req.Key) != "a" {
		return status.Error(codes.InvalidArgument, "want key a")
	}
	for _, c := range chunks() {
		if err := ss.SendMsg(&rangestream.Response{RangeResponse: c}); err != nil {
			return err
		}
	}
	return s.err
}

// TestGetOverGRPC: the messages go through a real gRPC connection with
// gRPC's protobuf codec on both sides, and Get merges them.
func TestGetOverGRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func(t *testing.T, svc streamServer, register bool) *grpc.ClientConn {
		lis := bufconn.Listen(1 << 20)
		gs := grpc.NewServer()
		if register {
			gs.RegisterService(&grpc.ServiceDesc{
				ServiceName: "etcdserverpb.KV", HandlerType: (*any)(nil),
				Streams: []grpc.StreamDesc{{StreamName: "RangeStream", Handler: svc.serve, ServerStreams: true}},
			}, svc)
		}
		go gs.Serve(lis)
		t.Cleanup(gs.Stop)
		cc, err := grpc.NewClient("passthrough:///bufnet",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	cc := dial(t, streamServer{}, true)
	got, err := rangestream.Get(ctx, cc, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z")})
	if err != nil {
		t.Fatal(err)
	}
	if want := concatMerge(t, chunks()); got.String() != want.String() {
		t.Fatalf("Get gave %v, want %v", got, want)
	}
	if _, err := rangestream.Get(ctx, cc, &pb.RangeRequest{Key: []byte("b")}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want the server's InvalidArgument", err)
	}
	failing := dial(t, streamServer{err: status.Error(codes.OutOfRange, "compacted")}, true)
	if _, err := rangestream.Get(ctx, failing, &pb.RangeRequest{Key: []byte("a")}); status.Code(err) != codes.OutOfRange {
		t.Fatalf("got %v, want the error that ends the stream", err)
	}
	without := dial(t, streamServer{}, false)
	if _, err := rangestream.Get(ctx, without, &pb.RangeRequest{Key: []byte("a")}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("got %v, want Unimplemented from a server without the RPC", err)
	}
}

// FuzzUnmarshal: any bytes decode or fail without panicking, and what
// decodes re-encodes to bytes that decode to the same message.
func FuzzUnmarshal(f *testing.F) {
	for _, c := range chunks() {
		b, _ := (&rangestream.Response{RangeResponse: c}).Marshal()
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x80})
	f.Add([]byte{0x0b, 0x0c})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m rangestream.Response
		if err := m.Unmarshal(b); err != nil {
			return
		}
		again, err := m.Marshal()
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		var m2 rangestream.Response
		if err := m2.Unmarshal(again); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if m.String() != m2.String() {
			t.Fatalf("re-encoding changed the message: %v vs %v", m.String(), m2.String())
		}
	})
}
