package e2e

import (
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// TestAuthMemberList: with authentication on, MemberList needs some
// authenticated user ("etcdserver: user name is empty" without one), in
// its serializable and linearizable forms; any user may list, root or
// not, and the stock etcdctl fails the same way without --user.
func TestAuthMemberList(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	s := startServer(t, anonymousCapable(framework.ClusterConfig{}))
	addUserWithRole(ctx, t, s.cli, "u")
	enableAuthWithRoot(ctx, t, s.cluster, s.cli)

	anonymous := newTestClient(t, s.cluster.ClientURLs()[0])
	_, err := anonymous.MemberList(ctx)
	requireAuthError(t, err, rpctypes.ErrGRPCUserEmpty)
	_, err = anonymous.MemberList(ctx, clientv3.WithSerializable())
	requireAuthError(t, err, rpctypes.ErrGRPCUserEmpty)

	u := clientAs(t, s.cluster, s.cluster.ClientURLs(), "u", authUserPassword)
	for _, opts := range [][]clientv3.OpOption{nil, {clientv3.WithSerializable()}} {
		resp, err := u.MemberList(ctx, opts...)
		if err != nil {
			t.Fatalf("MemberList as a user without the root role: %v", err)
		}
		if len(resp.Members) != 1 {
			t.Fatalf("MemberList as u: %d members, want 1", len(resp.Members))
		}
	}

	r := etcdctlRunner{t: t, ctx: ctx, cli: s.cluster.Etcdctl()}
	r.expectError("Error: etcdserver: user name is empty", "member", "list")
}
