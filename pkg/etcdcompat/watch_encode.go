package etcdcompat

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// encodedMessage is a message already encoded, handed to gRPC in its place.
//
// gRPC's proto codec sees etcd's gogo-generated messages as legacy ones,
// which the protobuf runtime can only size by marshaling them: every send
// encodes the message twice (once to learn its size, once into gRPC's
// buffer), allocating each time. A watch stream sends one response per
// watcher per change, so this is most of its CPU. The protobuf runtime
// treats encodedMessage as a legacy message too (one without fields), whose
// Marshal hands back the bytes encoded once.
type encodedMessage struct{ buf []byte }

func (m *encodedMessage) Marshal() ([]byte, error) { return m.buf, nil }
func (m *encodedMessage) Reset()                   { m.buf = nil }
func (m *encodedMessage) String() string {
	return fmt.Sprintf("encoded message (%d bytes)", len(m.buf))
}
func (*encodedMessage) ProtoMessage() {}

// sendEncoded encodes resp once and sends it on stream. gRPC keeps the
// encoded bytes until they are written, so they are a fresh buffer; resp
// itself is not kept and may be reused as soon as it returns.
func sendEncoded(stream grpc.ServerStream, resp *pb.WatchResponse) error {
	buf := make([]byte, resp.Size())
	n, err := resp.MarshalToSizedBuffer(buf)
	if err != nil {
		return fmt.Errorf("encode watch response: %w", err)
	}
	return stream.SendMsg(&encodedMessage{buf: buf[len(buf)-n:]})
}
