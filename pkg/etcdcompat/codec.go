package etcdcompat

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// serverOptions are the gRPC options that feed these metrics: the byte
// counting codec.
func (m *clientMetrics) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(m.serverCodec())}
}

// serverCodec is the server's codec, counting bytes.
func (m *clientMetrics) serverCodec() encoding.CodecV2 {
	return countingCodec{inner: encoding.GetCodecV2(proto.Name), m: m}
}

// gogoMessage is a message with gogoproto's generated marshalling, as
// every etcd API type (etcdserverpb, mvccpb, authpb, v3lockpb,
// v3electionpb) has.
type gogoMessage interface {
	Reset()
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
	Unmarshal([]byte) error
}

// countingCodec is gRPC's proto codec counting the bytes of every message
// it encodes and decodes, as etcd's codec does for
// etcd_network_client_grpc_{sent,received}_bytes_total.
//
// It calls the generated Size, MarshalToSizedBuffer and Unmarshal methods
// of etcd's gogoproto types itself. gRPC's codec reaches them through
// protobuf-go's wrapper for such (v1) messages, which sized every response
// by marshalling it, marshalled it again into a fresh slice and copied
// that, and wrapped every message through reflection (the profiles of
// put and range in docs/performance.md, "Measurements behind the code").
// The bytes on the wire, and the errors of a malformed request, are the
// same: the wrapper ends in these very methods. Other messages (gRPC's
// health service) go to gRPC's codec.
type countingCodec struct {
	inner encoding.CodecV2
	m     *clientMetrics
}

func (c countingCodec) Marshal(v any) (mem.BufferSlice, error) {
	var out mem.BufferSlice
	var err error
	if gm, ok := v.(gogoMessage); ok {
		out, err = marshalGogo(gm)
	} else {
		out, err = c.inner.Marshal(v)
	}
	if err == nil {
		c.m.sentBytes.Add(float64(out.Len()))
	}
	return out, err
}

// marshalGogo encodes m into one buffer, from gRPC's pool when it is
// large enough for pooling to pay (gRPC frees it once written).
func marshalGogo(m gogoMessage) (mem.BufferSlice, error) {
	size := m.Size()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := m.MarshalToSizedBuffer(buf); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBuffer((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.m.receivedBytes.Add(float64(data.Len()))
	gm, ok := v.(gogoMessage)
	if !ok {
		return c.inner.Unmarshal(data, v)
	}
	// The generated Unmarshal copies bytes and strings out of its input,
	// so the buffer goes back to the pool at once.
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	gm.Reset()
	return gm.Unmarshal(buf.ReadOnlyData())
}

func (c countingCodec) Name() string { return c.inner.Name() }
