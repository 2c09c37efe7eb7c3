package v3lockpb

import (
	"bytes"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/protoadapt"

	"github.com/metastore-io/metastore/pkg/concurrency/internal/wiretest"
)

// The golden encodings are what etcd's generated v3lockpb code produces
// for the same messages (field number, wire type, value, in field order).
func TestWireEncodingMatchesEtcd(t *testing.T) {
	wiretest.CheckGolden(t, []wiretest.Golden{
		{Msg: &LockRequest{Name: []byte("foo"), Lease: 12}, Hex: "0a03666f6f100c"},
		{Msg: &LockResponse{Header: &pb.ResponseHeader{ClusterId: 1, Revision: 5}, Key: []byte("k")}, Hex: "0a040801180512016b"},
		{Msg: &UnlockRequest{Key: []byte("k")}, Hex: "0a016b"},
		{Msg: &UnlockResponse{Header: &pb.ResponseHeader{RaftTerm: 2}}, Hex: "0a022002"},
		{Msg: &LockRequest{}, Hex: ""},
	})
}

func TestJSONNamesMatchEtcdGateway(t *testing.T) {
	var req LockRequest
	if err := protojson.Unmarshal([]byte(`{"name":"Zm9v","lease":"12"}`), protoadapt.MessageV2Of(&req)); err != nil {
		t.Fatal(err)
	}
	if string(req.Name) != "foo" || req.Lease != 12 {
		t.Fatalf("decoded %v", &req)
	}
	out, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(protoadapt.MessageV2Of(&LockResponse{Key: []byte("k"), Header: &pb.ResponseHeader{MemberId: 7}}))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	for _, b := range out {
		if b != ' ' {
			compact.WriteByte(b)
		}
	}
	if got, want := compact.String(), `{"header":{"member_id":"7"},"key":"aw=="}`; got != want {
		t.Fatalf("JSON = %s, want %s", got, want)
	}
}

// FuzzUnmarshal feeds arbitrary bytes to every message: decoding must not
// panic, and whatever decodes must survive a marshal/unmarshal round trip.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte{0x0a, 0x03, 'f', 'o', 'o', 0x10, 0x0c})
	f.Add([]byte{0x0a, 0x04, 0x08, 0x01, 0x18, 0x05, 0x12, 0x01, 'k'})
	f.Add([]byte{0x0a, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		wiretest.CheckRoundTrip(t, data,
			func() protoadapt.MessageV1 { return new(LockRequest) },
			func() protoadapt.MessageV1 { return new(LockResponse) },
			func() protoadapt.MessageV1 { return new(UnlockRequest) },
			func() protoadapt.MessageV1 { return new(UnlockResponse) },
		)
	})
}
