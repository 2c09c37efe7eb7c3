package e2e

import (
	"context"
	"errors"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"github.com/metastore-io/metastore/test/framework"
)

// The auth tests' root password and the role/user they set up.
const (
	authRootPassword = "rootpw"
	authUserPassword = "userpw"
)

// rootUser is etcdctl's --user for root.
var rootUser = "--user=root:" + authRootPassword

// fails runs etcdctl expecting a non-zero exit and returns its stderr's
// "Error: ..." line (etcdctl also logs the client's retries as JSON).
func (r etcdctlRunner) fails(stdin string, args ...string) string {
	r.t.Helper()
	res, err := r.cli.RunWithStdin(r.ctx, stdin, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	if res.ExitCode == 0 {
		r.t.Fatalf("etcdctl %s succeeded, want a failure\nstdout: %s", strings.Join(args, " "), res.Stdout)
	}
	for _, line := range strings.Split(res.Stderr, "\n") {
		if strings.HasPrefix(line, "Error: ") {
			return line
		}
	}
	r.t.Fatalf("etcdctl %s: no error line in stderr:\n%s", strings.Join(args, " "), res.Stderr)
	return ""
}

// expectError runs etcdctl expecting it to fail with exactly want.
func (r etcdctlRunner) expectError(want string, args ...string) {
	r.t.Helper()
	if got := r.fails("", args...); got != want {
		r.t.Fatalf("etcdctl %s failed with %q, want %q", strings.Join(args, " "), got, want)
	}
}

// enableAuthWithRoot creates root with the root role and enables auth
// through the Auth API, then makes the framework's probes log in as root.
func enableAuthWithRoot(ctx context.Context, t *testing.T, c *framework.Cluster, cli *clientv3.Client) {
	t.Helper()
	if _, err := cli.UserAdd(ctx, "root", authRootPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	c.SetCredentials("root", authRootPassword)
}

// addUserWithRole adds user (password authUserPassword) with a new role of
// the same name holding perms.
func addUserWithRole(ctx context.Context, t *testing.T, cli *clientv3.Client, user string, perms ...clientv3.Permission) {
	t.Helper()
	if _, err := cli.RoleAdd(ctx, user); err != nil {
		t.Fatal(err)
	}
	for _, p := range perms {
		if _, err := cli.RoleGrantPermission(ctx, user, string(p.Key), string(p.RangeEnd), clientv3.PermissionType(p.PermType)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.UserAdd(ctx, user, authUserPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, user, user); err != nil {
		t.Fatal(err)
	}
}

// perm is a permission for addUserWithRole.
func perm(typ authpb.Permission_Type, key, end string) clientv3.Permission {
	return clientv3.Permission{PermType: typ, Key: []byte(key), RangeEnd: []byte(end)}
}

// clientAs is a client of endpoints of c logged in as user (over the
// cluster's client TLS, if any).
func clientAs(t *testing.T, c *framework.Cluster, endpoints []string, user, password string) *clientv3.Client {
	t.Helper()
	tlsCfg, err := c.TLS().ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, Username: user, Password: password, TLS: tlsCfg,
		DialTimeout: framework.DefaultDialTimeout, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("client as %s: %v", user, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// authenticate returns a token for user from the member cli talks to.
func authenticate(ctx context.Context, t *testing.T, cli *clientv3.Client, user, password string) string {
	t.Helper()
	resp, err := pb.NewAuthClient(cli.ActiveConnection()).Authenticate(ctx, &pb.AuthenticateRequest{Name: user, Password: password})
	if err != nil {
		t.Fatalf("authenticate %s: %v", user, err)
	}
	return resp.Token
}

// withToken carries token the way clientv3 does.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "token", token)
}

// requireAuthError checks that err is want (one of rpctypes.ErrGRPC*),
// whether it arrives as a gRPC status or as the rpctypes.EtcdError
// clientv3's interceptors turn statuses into.
func requireAuthError(t *testing.T, err error, want error) {
	t.Helper()
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		ws, _ := status.FromError(want)
		if ee.Code() != ws.Code() || ee.Error() != ws.Message() {
			t.Fatalf("got error code=%s message=%q, want code=%s message=%q", ee.Code(), ee.Error(), ws.Code(), ws.Message())
		}
		return
	}
	requireRPCError(t, err, want)
}

// anonymousCapable is the cluster configuration of the auth tests that
// check what a caller without credentials gets. Under E2E_TLS=1 every
// client of the framework would present a certificate whose Common Name
// names a user (--client-cert-auth), so these clusters pin plaintext;
// TestAuthCommonNameIdentity covers certificate identity.
func anonymousCapable(cfg framework.ClusterConfig) framework.ClusterConfig {
	cfg.TLS = &framework.TLSConfig{}
	return cfg
}
