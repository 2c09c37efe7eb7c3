package lockservice

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/internal/lockservice"
	"github.com/metastore-io/metastore/pkg/lockapi"
	"github.com/metastore-io/metastore/pkg/lockclient"
	"github.com/metastore-io/metastore/test/framework"
)

// TestLockServiceWithAuth: with authentication enabled the lock service
// needs a token in the Authorization header, as the JSON gateway does, and
// acts with its user's permissions: a user with read-write on the
// service's prefix locks, holds past the lease TTL (its lease is renewed)
// and unlocks; a request without a token gets 401, one whose user may not
// touch the prefix 403.
func TestLockServiceWithAuth(t *testing.T) {
	requireMetaStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cluster := framework.NewCluster(t, framework.ClusterConfig{})
	root := cluster.NewClient(t)
	const password = "pw-lock"
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []struct {
		name, key, end string
	}{
		{"locker", lockservice.DefaultPrefix, clientv3.GetPrefixRangeEnd(lockservice.DefaultPrefix)},
		{"outsider", "/other/", clientv3.GetPrefixRangeEnd("/other/")},
	} {
		must(root.RoleAdd(ctx, u.name))
		must(root.RoleGrantPermission(ctx, u.name, u.key, u.end, clientv3.PermissionType(authpb.READWRITE)))
		must(root.UserAdd(ctx, u.name, password))
		must(root.UserGrantRole(ctx, u.name, u.name))
	}
	must(root.UserAdd(ctx, "root", password))
	must(root.UserGrantRole(ctx, "root", "root"))
	must(root.AuthEnable(ctx))
	cluster.SetCredentials("root", password)

	s := newService(t, cluster, cluster.Member(0))
	token := func(user string) string {
		resp, err := pb.NewAuthClient(root.ActiveConnection()).Authenticate(ctx, &pb.AuthenticateRequest{Name: user, Password: password})
		if err != nil {
			t.Fatalf("authenticate %s: %v", user, err)
		}
		return resp.Token
	}
	as := func(tok string) *lockclient.Client {
		c, err := lockclient.New(lockclient.Config{Endpoints: []string{s.baseURL}, HTTPClient: s.http, MaxRetries: -1, Authorization: tok})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	req := lockclient.Request{Type: "auth", ResourceID: "r", NodeID: "n"}

	l, err := as(token("locker")).Lock(ctx, req)
	if err != nil {
		t.Fatalf("lock with a permitted user's token: %v", err)
	}
	select {
	case <-l.Lost():
		t.Fatalf("lost the lock while holding it: %v", l.Err())
	case <-time.After(lockservice.DefaultLeaseTTL + 2*time.Second):
	}
	unlock(t, ctx, l)

	for _, c := range []struct {
		name, token string
		code        int
	}{{"no token", "", http.StatusUnauthorized}, {"outsider", token("outsider"), http.StatusForbidden}} {
		_, err := as(c.token).Lock(ctx, req)
		var se *lockclient.StatusError
		if !asStatus(err, &se) || se.Code != c.code {
			t.Errorf("lock as %s: %v, want %d", c.name, err, c.code)
		}
	}
	if st := s.statusAs(ctx, token("locker"), "auth", "r"); st.Holder != nil {
		t.Fatalf("a refused request left a place: %+v", st)
	}
	code, body := s.post(ctx, lockapi.PathUnlock, `{"Type":"auth","ResourceID":"r","NodeID":"n","Success":true}`)
	if code != http.StatusUnauthorized || !strings.Contains(body, "user name is empty") {
		t.Fatalf("unlock without a token: %d %s, want 401", code, body)
	}
}

// statusAs reads the queue with a token.
func (s *service) statusAs(ctx context.Context, token, typ, resource string) lockapi.StatusResponse {
	s.t.Helper()
	prev := s.http
	s.http = &http.Client{Transport: authTransport{token: token, base: prev.Transport}}
	defer func() { s.http = prev }()
	return s.status(ctx, typ, resource)
}

// authTransport adds an Authorization header to every request.
type authTransport struct {
	token string
	base  http.RoundTripper
}

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", a.token)
	base := a.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}
