package lockservice

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"
)

// TestCredentialsReachTheMember: the Authorization header travels as the
// "authorization" metadata of the calls made for the request, as etcd's
// gateway forwards it; without the header nothing is added.
func TestCredentialsReachTheMember(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/lock/lock", nil)
	if _, ok := metadata.FromOutgoingContext(withCredentials(context.Background(), r)); ok {
		t.Fatal("metadata added without an Authorization header")
	}
	r.Header.Set("Authorization", "token-abc")
	md, _ := metadata.FromOutgoingContext(withCredentials(context.Background(), r))
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "token-abc" {
		t.Fatalf("authorization metadata %v, want [token-abc]", got)
	}
}

// TestStatusOf maps the member's errors, as clientv3 returns them, to
// HTTP statuses.
func TestStatusOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{context.DeadlineExceeded, http.StatusServiceUnavailable},
		{rpctypes.ErrNoLeader, http.StatusServiceUnavailable},
		{rpctypes.ErrGRPCNoLeader, http.StatusServiceUnavailable},
		{rpctypes.ErrTimeout, http.StatusServiceUnavailable},
		{rpctypes.ErrUserEmpty, http.StatusUnauthorized},
		{rpctypes.ErrInvalidAuthToken, http.StatusUnauthorized},
		{rpctypes.ErrPermissionDenied, http.StatusForbidden},
		{rpctypes.ErrKeyNotFound, http.StatusBadRequest},
		{errors.New("boom"), http.StatusInternalServerError},
	} {
		if got := statusOf(fmt.Errorf("wrapped: %w", c.err)); got != c.want {
			t.Errorf("statusOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
