package lockservice

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

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

// TestStatusOf maps the member's errors to HTTP statuses.
func TestStatusOf(t *testing.T) {
	if got := statusOf(context.DeadlineExceeded); got != http.StatusServiceUnavailable {
		t.Fatalf("deadline: %d", got)
	}
}
