package etcdcompat

import (
	"bytes"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
)

// TestCodecMatchesGRPCCodec checks the codec's direct use of the gogoproto
// methods encodes the bytes gRPC's own codec encodes, decodes them back,
// small and pooled sizes alike, and still serves messages of other kinds.
func TestCodecMatchesGRPCCodec(t *testing.T) {
	m, _ := newTestClientMetrics(t)
	ours, grpcs := m.serverCodec(), encoding.GetCodecV2(proto.Name)
	big := bytes.Repeat([]byte("v"), 64*1024) // above gRPC's pooling threshold
	for _, msg := range []any{
		&pb.PutRequest{Key: []byte("key"), Value: []byte("value"), Lease: 7},
		&pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 9}, Count: 2,
			Kvs: []*mvccpb.KeyValue{{Key: []byte("a"), Value: big, ModRevision: 3}, {Key: []byte("b")}}},
		&pb.PutResponse{}, // encodes to nothing
		&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING},
	} {
		want, err := grpcs.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ours.Marshal(msg)
		if err != nil {
			t.Fatalf("%T: %v", msg, err)
		}
		if !bytes.Equal(got.Materialize(), want.Materialize()) {
			t.Errorf("%T: encoded %x, gRPC's codec %x", msg, got.Materialize(), want.Materialize())
		}
		back := newOfSameType(msg)
		if err := ours.Unmarshal(got, back); err != nil {
			t.Fatalf("%T: decode: %v", msg, err)
		}
		again, _ := grpcs.Marshal(back)
		if !bytes.Equal(again.Materialize(), want.Materialize()) {
			t.Errorf("%T: decoded into %v", msg, back)
		}
		got.Free()
		want.Free()
		again.Free()
	}
}

func newOfSameType(msg any) any {
	switch msg.(type) {
	case *pb.PutRequest:
		return &pb.PutRequest{}
	case *pb.RangeResponse:
		return &pb.RangeResponse{}
	case *pb.PutResponse:
		return &pb.PutResponse{}
	case *healthpb.HealthCheckResponse:
		return &healthpb.HealthCheckResponse{}
	}
	panic("no such message")
}

// TestCodecRejectsAsGRPCCodec checks a malformed request fails with the
// error gRPC's codec gives (the one etcd answers), and that decoding
// replaces what the message held.
func TestCodecRejectsAsGRPCCodec(t *testing.T) {
	m, _ := newTestClientMetrics(t)
	ours, grpcs := m.serverCodec(), encoding.GetCodecV2(proto.Name)
	bad := mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x05, 'k'})} // key says 5 bytes, has 1
	errOurs := ours.Unmarshal(bad, &pb.PutRequest{})
	errGRPC := grpcs.Unmarshal(bad, &pb.PutRequest{})
	if errOurs == nil || errGRPC == nil || errOurs.Error() != errGRPC.Error() {
		t.Errorf("malformed request: %v, gRPC's codec: %v", errOurs, errGRPC)
	}
	req := &pb.RangeRequest{Key: []byte("old"), Limit: 5}
	in, _ := ours.Marshal(&pb.RangeRequest{Key: []byte("new")})
	if err := ours.Unmarshal(in, req); err != nil || string(req.Key) != "new" || req.Limit != 0 {
		t.Errorf("decoded %v (%v), want only key new", req, err)
	}
}
