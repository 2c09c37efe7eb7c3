package rangestream

import (
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// Response is etcd's RangeStreamResponse:
//
//	message RangeStreamResponse { RangeResponse range_response = 1; }
//
// Its Marshal and Unmarshal make it a message gRPC's protobuf codec
// encodes as is (a legacy message, like etcd's generated types).
type Response struct {
	RangeResponse *pb.RangeResponse `protobuf:"bytes,1,opt,name=range_response,json=rangeResponse,proto3" json:"range_response,omitempty"`
}

// rangeResponseField is the tag of field 1, length-delimited.
var rangeResponseField = protowire.AppendTag(nil, 1, protowire.BytesType)

func (m *Response) Reset()         { *m = Response{} }
func (m *Response) String() string { return fmt.Sprintf("range_response:<%v>", m.RangeResponse) }
func (*Response) ProtoMessage()    {}

// Size is the length of the encoding.
func (m *Response) Size() int {
	if m == nil || m.RangeResponse == nil {
		return 0
	}
	n := m.RangeResponse.Size()
	return len(rangeResponseField) + protowire.SizeBytes(n)
}

// Marshal encodes m in protobuf wire format.
func (m *Response) Marshal() ([]byte, error) {
	buf := make([]byte, m.Size())
	n, err := m.MarshalToSizedBuffer(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// MarshalToSizedBuffer encodes m into the end of buf, which must hold
// Size bytes, and returns how many it wrote: gogoproto's method, which
// MetaStore's server codec calls to encode a chunk once, in place.
func (m *Response) MarshalToSizedBuffer(buf []byte) (int, error) {
	if m.RangeResponse == nil {
		return 0, nil
	}
	n, err := m.RangeResponse.MarshalToSizedBuffer(buf)
	if err != nil {
		return 0, fmt.Errorf("range_response: %w", err)
	}
	prefix := protowire.AppendVarint(append([]byte(nil), rangeResponseField...), uint64(n))
	i := len(buf) - n - len(prefix)
	if i < 0 {
		return 0, errors.New("rangestream: buffer smaller than Size")
	}
	copy(buf[i:], prefix)
	return len(buf) - i, nil
}

// errMalformed reports bytes that are not a RangeStreamResponse.
var errMalformed = errors.New("rangestream: malformed RangeStreamResponse")

// Unmarshal decodes b into m, merging as protobuf does: a repeated
// range_response field merges into the one already there. Unknown fields
// are skipped; malformed input is an error, never a panic.
func (m *Response) Unmarshal(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: range_response: %v", errMalformed, protowire.ParseError(n))
			}
			if m.RangeResponse == nil {
				m.RangeResponse = &pb.RangeResponse{}
			}
			if err := m.RangeResponse.Unmarshal(v); err != nil {
				return fmt.Errorf("%w: range_response: %v", errMalformed, err)
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", errMalformed, num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

// Merge merges src into dst as proto.Merge does for RangeResponse: the
// key-values are appended, the header's and the other fields that are
// set in src replace dst's.
func Merge(dst, src *pb.RangeResponse) {
	if src.Header != nil {
		if dst.Header == nil {
			dst.Header = &pb.ResponseHeader{}
		}
		h, s := dst.Header, src.Header
		if s.ClusterId != 0 {
			h.ClusterId = s.ClusterId
		}
		if s.MemberId != 0 {
			h.MemberId = s.MemberId
		}
		if s.Revision != 0 {
			h.Revision = s.Revision
		}
		if s.RaftTerm != 0 {
			h.RaftTerm = s.RaftTerm
		}
	}
	dst.Kvs = append(dst.Kvs, src.Kvs...)
	if src.Count != 0 {
		dst.Count = src.Count
	}
	if src.More {
		dst.More = true
	}
}
