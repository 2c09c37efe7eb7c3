package v3lockpb

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/runtime/protoimpl"
)

// LockRequest asks for the lock called Name, held under lease Lease.
type LockRequest struct {
	// Name is the lock's name: the key prefix of its queue.
	Name []byte `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	// Lease is the lease the lock's key is attached to; the lock is
	// released when it expires.
	Lease int64 `protobuf:"varint,2,opt,name=lease,proto3" json:"lease,omitempty"`
}

func (m *LockRequest) Reset()                { *m = LockRequest{} }
func (m *LockRequest) String() string        { return text(m) }
func (*LockRequest) ProtoMessage()           {}
func (*LockRequest) XXX_MessageName() string { return "v3lockpb.LockRequest" }

func (m *LockRequest) GetName() []byte {
	if m != nil {
		return m.Name
	}
	return nil
}

func (m *LockRequest) GetLease() int64 {
	if m != nil {
		return m.Lease
	}
	return 0
}

// LockResponse reports the acquired lock.
type LockResponse struct {
	Header *pb.ResponseHeader `protobuf:"bytes,1,opt,name=header,proto3" json:"header,omitempty"`
	// Key exists as long as the caller holds the lock; pass it to Unlock,
	// or compare its create revision in a Txn to write only while holding.
	Key []byte `protobuf:"bytes,2,opt,name=key,proto3" json:"key,omitempty"`
}

func (m *LockResponse) Reset()                { *m = LockResponse{} }
func (m *LockResponse) String() string        { return text(m) }
func (*LockResponse) ProtoMessage()           {}
func (*LockResponse) XXX_MessageName() string { return "v3lockpb.LockResponse" }

func (m *LockResponse) GetHeader() *pb.ResponseHeader {
	if m != nil {
		return m.Header
	}
	return nil
}

func (m *LockResponse) GetKey() []byte {
	if m != nil {
		return m.Key
	}
	return nil
}

// UnlockRequest releases the lock represented by Key.
type UnlockRequest struct {
	// Key is the key Lock returned.
	Key []byte `protobuf:"bytes,1,opt,name=key,proto3" json:"key,omitempty"`
}

func (m *UnlockRequest) Reset()                { *m = UnlockRequest{} }
func (m *UnlockRequest) String() string        { return text(m) }
func (*UnlockRequest) ProtoMessage()           {}
func (*UnlockRequest) XXX_MessageName() string { return "v3lockpb.UnlockRequest" }

func (m *UnlockRequest) GetKey() []byte {
	if m != nil {
		return m.Key
	}
	return nil
}

// UnlockResponse acknowledges an Unlock.
type UnlockResponse struct {
	Header *pb.ResponseHeader `protobuf:"bytes,1,opt,name=header,proto3" json:"header,omitempty"`
}

func (m *UnlockResponse) Reset()                { *m = UnlockResponse{} }
func (m *UnlockResponse) String() string        { return text(m) }
func (*UnlockResponse) ProtoMessage()           {}
func (*UnlockResponse) XXX_MessageName() string { return "v3lockpb.UnlockResponse" }

func (m *UnlockResponse) GetHeader() *pb.ResponseHeader {
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
