package v3electionpb

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/runtime/protoimpl"
)

// CampaignRequest enters the election Name under lease Lease with Value.
type CampaignRequest struct {
	Name  []byte `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	Lease int64  `protobuf:"varint,2,opt,name=lease,proto3" json:"lease,omitempty"`
	Value []byte `protobuf:"bytes,3,opt,name=value,proto3" json:"value,omitempty"`
}

func (m *CampaignRequest) Reset()                { *m = CampaignRequest{} }
func (m *CampaignRequest) String() string        { return text(m) }
func (*CampaignRequest) ProtoMessage()           {}
func (*CampaignRequest) XXX_MessageName() string { return "v3electionpb.CampaignRequest" }

func (m *CampaignRequest) GetName() []byte {
	if m != nil {
		return m.Name
	}
	return nil
}

func (m *CampaignRequest) GetLease() int64 {
	if m != nil {
		return m.Lease
	}
	return 0
}

func (m *CampaignRequest) GetValue() []byte {
	if m != nil {
		return m.Value
	}
	return nil
}

// CampaignResponse reports the won leadership.
type CampaignResponse struct {
	Header *pb.ResponseHeader `protobuf:"bytes,1,opt,name=header,proto3" json:"header,omitempty"`
	Leader *LeaderKey         `protobuf:"bytes,2,opt,name=leader,proto3" json:"leader,omitempty"`
}

func (m *CampaignResponse) Reset()                { *m = CampaignResponse{} }
func (m *CampaignResponse) String() string        { return text(m) }
func (*CampaignResponse) ProtoMessage()           {}
func (*CampaignResponse) XXX_MessageName() string { return "v3electionpb.CampaignResponse" }

func (m *CampaignResponse) GetHeader() *pb.ResponseHeader {
	if m != nil {
		return m.Header
	}
	return nil
}

func (m *CampaignResponse) GetLeader() *LeaderKey {
	if m != nil {
		return m.Leader
	}
	return nil
}

// LeaderKey identifies a leadership: the election, the leader's key, its
// create revision and its lease. Proclaim and Resign take it.
type LeaderKey struct {
	Name  []byte `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	Key   []byte `protobuf:"bytes,2,opt,name=key,proto3" json:"key,omitempty"`
	Rev   int64  `protobuf:"varint,3,opt,name=rev,proto3" json:"rev,omitempty"`
	Lease int64  `protobuf:"varint,4,opt,name=lease,proto3" json:"lease,omitempty"`
}

func (m *LeaderKey) Reset()                { *m = LeaderKey{} }
func (m *LeaderKey) String() string        { return text(m) }
func (*LeaderKey) ProtoMessage()           {}
func (*LeaderKey) XXX_MessageName() string { return "v3electionpb.LeaderKey" }

func (m *LeaderKey) GetName() []byte {
	if m != nil {
		return m.Name
	}
	return nil
}

func (m *LeaderKey) GetKey() []byte {
	if m != nil {
		return m.Key
	}
	return nil
}

func (m *LeaderKey) GetRev() int64 {
	if m != nil {
		return m.Rev
	}
	return 0
}

func (m *LeaderKey) GetLease() int64 {
	if m != nil {
		return m.Lease
	}
	return 0
}

// LeaderRequest names the election Leader and Observe look at.
type LeaderRequest struct {
	Name []byte `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
}

func (m *LeaderRequest) Reset()                { *m = LeaderRequest{} }
func (m *LeaderRequest) String() string        { return text(m) }
func (*LeaderRequest) ProtoMessage()           {}
func (*LeaderRequest) XXX_MessageName() string { return "v3electionpb.LeaderRequest" }

func (m *LeaderRequest) GetName() []byte {
	if m != nil {
		return m.Name
	}
	return nil
}

// LeaderResponse carries the leader's key-value.
type LeaderResponse struct {
	Header *pb.ResponseHeader `protobuf:"bytes,1,opt,name=header,proto3" json:"header,omitempty"`
	Kv     *mvccpb.KeyValue   `protobuf:"bytes,2,opt,name=kv,proto3" json:"kv,omitempty"`
}

func (m *LeaderResponse) Reset()                { *m = LeaderResponse{} }
func (m *LeaderResponse) String() string        { return text(m) }
func (*LeaderResponse) ProtoMessage()           {}
func (*LeaderResponse) XXX_MessageName() string { return "v3electionpb.LeaderResponse" }

func (m *LeaderResponse) GetHeader() *pb.ResponseHeader {
	if m != nil {
		return m.Header
	}
	return nil
}

func (m *LeaderResponse) GetKv() *mvccpb.KeyValue {
	if m != nil {
		return m.Kv
	}
	return nil
}

// ResignRequest gives up the leadership Leader.
type ResignRequest struct {
	Leader *LeaderKey `protobuf:"bytes,1,opt,name=leader,proto3" json:"leader,omitempty"`
}

func (m *ResignRequest) Reset()                { *m = ResignRequest{} }
func (m *ResignRequest) String() string        { return text(m) }
func (*ResignRequest) ProtoMessage()           {}
func (*ResignRequest) XXX_MessageName() string { return "v3electionpb.ResignRequest" }

func (m *ResignRequest) GetLeader() *LeaderKey {
	if m != nil {
		return m.Leader
	}
	return nil
}

// ResignResponse acknowledges a Resign.
type ResignResponse struct {
	Header *pb.ResponseHeader `protobuf:"bytes,1,opt,name=header,proto3" json:"header,omitempty"`
}

func (m *ResignResponse) Reset()                { *m = ResignResponse{} }
func (m *ResignResponse) String() string        { return text(m) }
func (*ResignResponse) ProtoMessage()           {}
func (*ResignResponse) XXX_MessageName() string { return "v3electionpb.ResignResponse" }

func (m *ResignResponse) GetHeader() *pb.ResponseHeader {
	if m != nil {
		return m.Header
	}
	return nil
}

// ProclaimRequest sets the value of the leadership Leader.
type ProclaimRequest struct {
	Leader *LeaderKey `protobuf:"bytes,1,opt,name=leader,proto3" json:"leader,omitempty"`
	Value  []byte     `protobuf:"bytes,2,opt,name=value,proto3" json:"value,omitempty"`
}

func (m *ProclaimRequest) Reset()                { *m = ProclaimRequest{} }
func (m *ProclaimRequest) String() string        { return text(m) }
func (*ProclaimRequest) ProtoMessage()           {}
func (*ProclaimRequest) XXX_MessageName() string { return "v3electionpb.ProclaimRequest" }

func (m *ProclaimRequest) GetLeader() *LeaderKey {
	if m != nil {
		return m.Leader
	}
	return nil
}

func (m *ProclaimRequest) GetValue() []byte {
	if m != nil {
		return m.Value
	}
	return nil
}

// ProclaimResponse acknowledges a Proclaim.
type ProclaimResponse struct {
	Header *pb.ResponseHeader `protobuf:"bytes,1,opt,name=header,proto3" json:"header,omitempty"`
}

func (m *ProclaimResponse) Reset()                { *m = ProclaimResponse{} }
func (m *ProclaimResponse) String() string        { return text(m) }
func (*ProclaimResponse) ProtoMessage()           {}
func (*ProclaimResponse) XXX_MessageName() string { return "v3electionpb.ProclaimResponse" }

func (m *ProclaimResponse) GetHeader() *pb.ResponseHeader {
	if m != nil {
		return m.Header
	}
	return nil
}

// text renders a message in the protobuf text format, as generated code's
// String does.
func text(m protoadapt.MessageV1) string {
	return protoimpl.X.MessageStringOf(protoadapt.MessageV2Of(m))
}
