package e2e

import (
	"net/http"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/concurrency/v3lockpb"
	"github.com/metastore-io/metastore/test/framework"
)

// TestAuthCommonNameIdentity: with --client-cert-auth, a request without
// a token is its client certificate's Common Name's; a token wins over the
// certificate; the JSON gateway refuses a request over a certificate with
// a CN (it could not pass the identity on). The Lock service acts as the
// certificate's user as well.
func TestAuthCommonNameIdentity(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	pki, err := framework.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The framework's own clients present the certificate of CN root.
	c := framework.NewCluster(t, framework.ClusterConfig{TLS: &framework.TLSConfig{PKI: pki, Client: true, ClientCert: pki.Root}})
	root := c.NewClient(t)
	// The user named like the PKI's client certificate (CN "client").
	addUserWithRole(ctx, t, root, "client", perm(clientv3.PermReadWrite, "mine/", "mine0"))
	if _, err := root.UserAdd(ctx, "root", authRootPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := root.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	// No token: root by its certificate.
	if _, err := root.UserList(ctx); err != nil {
		t.Fatalf("root by certificate: %v", err)
	}
	mustPut(ctx, t, root, "secret", "v")

	certClient := func(user, password string) *clientv3.Client {
		tlsCfg, err := framework.ClientTLSConfig(pki.CA.CertFile, pki.Client)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: c.ClientURLs(), TLS: tlsCfg, Username: user, Password: password,
			DialTimeout: framework.DefaultDialTimeout, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	byCN := certClient("", "")
	mustPut(ctx, t, byCN, "mine/a", "v")
	_, err = byCN.Get(ctx, "secret")
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = byCN.UserList(ctx)
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	// The Lock service acts as its caller, named by the certificate too.
	lock := v3lockpb.NewLockClient(byCN.ActiveConnection())
	held, err := lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("mine/lock")})
	if err != nil {
		t.Fatalf("lock by certificate under a permitted prefix: %v", err)
	}
	if _, err := lock.Unlock(ctx, &v3lockpb.UnlockRequest{Key: held.Key}); err != nil {
		t.Fatalf("unlock by certificate: %v", err)
	}
	// etcd's Lock service answers a denial with code Unknown: the
	// client's error passes through as a plain error.
	_, err = lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("secret")})
	if st, _ := status.FromError(err); st.Code() != codes.Unknown || st.Message() != "etcdserver: permission denied" {
		t.Fatalf("lock by certificate under a forbidden prefix: %v, want Unknown etcdserver: permission denied", err)
	}
	// A token names the user whatever the certificate says.
	byToken := certClient("root", authRootPassword)
	if _, err := byToken.Get(ctx, "secret"); err != nil {
		t.Fatalf("root by token over a client certificate: %v", err)
	}

	// The gateway: a certificate with a CN is refused outright, as the
	// gateway could not carry it.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Member(0).ClientURL()+"/v3/kv/range", strings.NewReader(`{"key":"c2VjcmV0"}`))
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := doHTTPOn(c.Member(0).HTTPClient(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusBadRequest || body != "CommonName of client sending a request against gateway will be ignored and not used as expected\n" {
		t.Fatalf("gateway with a root certificate and no token: %d %s", code, body)
	}
}
