package forward

import (
	"bytes"
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/lease"
)

func TestForwardReplyRoundTrip(t *testing.T) {
	body, err := DecodeReply(EncodeMessageReply(&pb.LeaseKeepAliveResponse{ID: 7, TTL: 30}, nil))
	if err != nil {
		t.Fatal(err)
	}
	var resp pb.LeaseKeepAliveResponse
	if err := resp.Unmarshal(body); err != nil || resp.ID != 7 || resp.TTL != 30 {
		t.Fatalf("decoded %+v, %v", &resp, err)
	}
	// Known errors come back as the same sentinel, others keep their text.
	for _, want := range []error{lease.ErrLeaseNotFound, lease.ErrNotPrimary, membererr.ErrLearnerNotReady, membership.ErrMemberNotLearner} {
		if _, err := DecodeReply(EncodeReply(nil, want)); !errors.Is(err, want) {
			t.Errorf("error %v came back as %v", want, err)
		}
	}
	if _, err := DecodeReply(EncodeReply(nil, errors.New("disk on fire"))); err == nil || err.Error() != "disk on fire" {
		t.Errorf("unknown error came back as %v", err)
	}
	for _, bad := range [][]byte{nil, {7}, {2, 'x'}} {
		if _, err := DecodeReply(bad); !errors.Is(err, ErrMalformedReply) {
			t.Errorf("DecodeReply(%q) = %v, want ErrMalformedReply", bad, err)
		}
	}
}

// FuzzDecodeReply: replies arrive from the network; decoding never panics,
// and an OK reply's body is exactly what follows the status byte.
func FuzzDecodeReply(f *testing.F) {
	f.Add(EncodeMessageReply(&pb.LeaseKeepAliveResponse{ID: 1, TTL: 5}, nil))
	f.Add(EncodeReply(nil, lease.ErrLeaseNotFound))
	f.Add([]byte{})
	f.Add([]byte{9, 9, 9})
	f.Fuzz(func(t *testing.T, reply []byte) {
		body, err := DecodeReply(reply)
		if err == nil && (len(reply) == 0 || reply[0] != replyOK || !bytes.Equal(body, reply[1:])) {
			t.Fatalf("DecodeReply(%q) accepted a reply that is not OK", reply)
		}
		if err != nil && body != nil {
			t.Fatalf("DecodeReply(%q) returned both a body and %v", reply, err)
		}
	})
}
