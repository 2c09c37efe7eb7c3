package v3electionpb

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/protoadapt"

	"github.com/metastore-io/metastore/pkg/concurrency/internal/wiretest"
)

// The golden encodings are what etcd's generated v3electionpb code
// produces for the same messages.
func TestWireEncodingMatchesEtcd(t *testing.T) {
	leader := &LeaderKey{Name: []byte("e"), Key: []byte("e/1"), Rev: 9, Lease: 1}
	wiretest.CheckGolden(t, []wiretest.Golden{
		{Msg: &CampaignRequest{Name: []byte("e"), Lease: 1, Value: []byte("v")}, Hex: "0a016510011a0176"},
		{Msg: leader, Hex: "0a01651203652f31180920" + "01"},
		{Msg: &CampaignResponse{Header: &pb.ResponseHeader{Revision: 3}, Leader: leader}, Hex: "0a021803120c" + "0a01651203652f3118092001"},
		{Msg: &LeaderRequest{Name: []byte("e")}, Hex: "0a0165"},
		{Msg: &LeaderResponse{Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v")}}, Hex: "1206" + "0a016b2a0176"},
		{Msg: &ResignRequest{Leader: &LeaderKey{Rev: 2}}, Hex: "0a021802"},
		{Msg: &ProclaimRequest{Leader: &LeaderKey{Rev: 2}, Value: []byte("v")}, Hex: "0a0218021201" + "76"},
		{Msg: &ProclaimResponse{}, Hex: ""},
		{Msg: &ResignResponse{Header: &pb.ResponseHeader{}}, Hex: "0a00"},
	})
}

// FuzzUnmarshal feeds arbitrary bytes to every message: decoding must not
// panic, and whatever decodes must survive a marshal/unmarshal round trip.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte{0x0a, 0x01, 'e', 0x10, 0x01, 0x1a, 0x01, 'v'})
	f.Add([]byte{0x12, 0x06, 0x0a, 0x01, 'k', 0x2a, 0x01, 'v'})
	f.Add([]byte{0x0a, 0x02, 0x18, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		wiretest.CheckRoundTrip(t, data,
			func() protoadapt.MessageV1 { return new(CampaignRequest) },
			func() protoadapt.MessageV1 { return new(CampaignResponse) },
			func() protoadapt.MessageV1 { return new(LeaderKey) },
			func() protoadapt.MessageV1 { return new(LeaderRequest) },
			func() protoadapt.MessageV1 { return new(LeaderResponse) },
			func() protoadapt.MessageV1 { return new(ResignRequest) },
			func() protoadapt.MessageV1 { return new(ResignResponse) },
			func() protoadapt.MessageV1 { return new(ProclaimRequest) },
			func() protoadapt.MessageV1 { return new(ProclaimResponse) },
		)
	})
}
