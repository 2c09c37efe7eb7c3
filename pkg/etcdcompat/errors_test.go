package etcdcompat

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// Every mapped error must be a gRPC status: anything else reaches the
// client as Unknown (rpctypes' client-side EtcdError values are not).
func TestGRPCErrorsAreStatuses(t *testing.T) {
	for from, to := range grpcErrors {
		if _, ok := status.FromError(to); !ok {
			t.Errorf("%v maps to %T, not a gRPC status", from, to)
		}
	}
	st := status.Convert(ToGRPCError(fmt.Errorf("propose: %w", membererr.ErrTooManyRequests)))
	if st.Code() != codes.ResourceExhausted || st.Message() != "etcdserver: too many requests" {
		t.Fatalf("too many requests: %v", st)
	}
}

func TestResponseTooLargeStatus(t *testing.T) {
	err := fmt.Errorf("range: %w", &kvstore.ResponseTooLargeError{KVBytes: 5000, Limit: 4000 - kvstore.ResponseOverheadBytes})
	st := status.Convert(ToGRPCError(err))
	want := fmt.Sprintf("grpc: trying to send message larger than max (%d vs. 4000)", 5000+kvstore.ResponseOverheadBytes)
	if st.Code() != codes.ResourceExhausted || st.Message() != want {
		t.Fatalf("over the send limit: %v, want ResourceExhausted %q", st, want)
	}
	st = status.Convert(ToGRPCError(&kvstore.ResponseTooLargeError{KVBytes: 5000, Limit: 4000, Memory: true}))
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("over the memory bound: %v", st)
	}
}
