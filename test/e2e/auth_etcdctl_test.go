package e2e

import (
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// TestAuthEtcdctl drives users, roles, permissions of every kind and the
// auth switch with the stock etcdctl, checking its exact output.
func TestAuthEtcdctl(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	s := startServer(t, anonymousCapable(framework.ClusterConfig{}))
	r := etcdctlRunner{t: t, ctx: ctx, cli: s.cluster.Etcdctl()}
	u1 := "--user=u1:p1"

	r.expectError("Error: etcdserver: root user does not exist", "auth", "enable")
	r.expect("User root created\n", "user", "add", "root:"+authRootPassword)
	r.expect("Role r1 created\n", "role", "add", "r1")
	r.expectError("Error: etcdserver: role name already exists", "role", "add", "r1")
	r.expect("Role r1 updated\n", "role", "grant-permission", "r1", "readwrite", "foo")
	r.expect("Role r1 updated\n", "role", "grant-permission", "r1", "read", "--prefix", "pre/")
	r.expect("Role r1 updated\n", "role", "grant-permission", "r1", "write", "--from-key", "z")
	r.expect("Role r1 updated\n", "role", "grant-permission", "r1", "read", "a", "c")
	r.expect("User u1 created\n", "user", "add", "u1:p1")
	r.expectError("Error: etcdserver: user name already exists", "user", "add", "u1:p1")
	r.expect("User nopw created\n", "user", "add", "--no-password", "nopw")
	r.expect("Role r1 is granted to user u1\n", "user", "grant-role", "u1", "r1")
	r.expectError("Error: etcdserver: role name not found", "user", "grant-role", "u1", "nope")
	r.expectError("Error: etcdserver: user name not found", "user", "grant-role", "nobody", "r1")
	// etcdctl answers "root user does not have root role" by creating the
	// role and granting it, then enables.
	r.expect("Authentication Enabled\n", "auth", "enable")
	r.expect("User: root\nRoles: root\n", rootUser, "user", "get", "root")

	// Without credentials nothing but authentication works.
	r.expectError("Error: etcdserver: user name is empty", "put", "foo", "v")
	r.expectError("Error: etcdserver: user name is empty", "get", "foo")
	r.expectError("Error: etcdserver: authentication failed, invalid user ID or password", "--user=u1:bad", "get", "foo")
	r.expectError("Error: etcdserver: authentication failed, invalid user ID or password", "--user=nobody:x", "get", "foo")
	r.expect("Authentication Status: true\nAuthRevision: 12\n", rootUser, "auth", "status")
	r.expect("Role r1\nKV Read:\n\t[a, c)\n\tfoo\n\t[pre/, pre0) (prefix pre/)\nKV Write:\n\tfoo\n\t[z, <open ended>\n",
		rootUser, "role", "get", "r1")
	r.expect("nopw\nroot\nu1\n", rootUser, "user", "list")
	r.expect("r1\nroot\n", rootUser, "role", "list")
	r.expect("Role root\nKV Read:\n\t[, <open ended>\nKV Write:\n\t[, <open ended>\n", rootUser, "role", "get", "root")
	r.expect("User: u1\nRoles: r1\n", rootUser, "user", "get", "u1")

	// Every permission kind, as u1.
	r.expect("OK\n", u1, "put", "foo", "v1")
	r.expect("foo\nv1\n", u1, "get", "foo")
	r.expectError("Error: etcdserver: permission denied", u1, "put", "pre/x", "v")
	r.expect("OK\n", rootUser, "put", "pre/x", "v")
	r.expect("pre/x\nv\n", u1, "get", "--prefix", "pre/")
	r.expectError("Error: etcdserver: permission denied", u1, "get", "--prefix", "pre")
	r.expect("OK\n", u1, "put", "zz", "w")
	r.expectError("Error: etcdserver: permission denied", u1, "get", "zz")
	r.expectError("Error: etcdserver: permission denied", u1, "put", "--prev-kv", "zz", "w")
	r.expect("", u1, "get", "a", "c")
	r.expectError("Error: etcdserver: permission denied", u1, "get", "a", "d")
	r.expectError("Error: etcdserver: permission denied", u1, "get", "--from-key", "a")
	r.expect("1\n", u1, "del", "zz")
	r.expectError("Error: etcdserver: permission denied", u1, "del", "--prev-kv", "zz")
	r.expectError("Error: etcdserver: permission denied", u1, "compaction", "1")

	// A user reads itself and its roles, nothing more.
	r.expect("User: u1\nRoles: r1\n", u1, "user", "get", "u1")
	r.expectError("Error: etcdserver: permission denied", u1, "user", "get", "root")
	r.expectError("Error: etcdserver: permission denied", u1, "user", "list")
	r.expectError("Error: etcdserver: permission denied", u1, "role", "get", "root")
	r.expectError("Error: etcdserver: permission denied", u1, "auth", "status")
	r.expect("Role r1\nKV Read:\n\t[a, c)\n\tfoo\n\t[pre/, pre0) (prefix pre/)\nKV Write:\n\tfoo\n\t[z, <open ended>\n",
		u1, "role", "get", "r1")
	r.expectError("Error: rpc error: code = Unknown desc = auth: authentication failed, password was given for no password user", "--user=nopw:x", "get", "foo")

	// Root and its role cannot be removed while auth is on.
	r.expectError("Error: etcdserver: invalid auth management", rootUser, "user", "delete", "root")
	r.expectError("Error: etcdserver: invalid auth management", rootUser, "user", "revoke-role", "root", "root")
	r.expectError("Error: etcdserver: invalid auth management", rootUser, "role", "delete", "root")

	// Password change: the old one stops working.
	r.expect("Password updated\n", rootUser, "user", "passwd", "u1", "--interactive=false")
	if out := r.ok("p2\n", rootUser, "user", "passwd", "u1", "--interactive=false"); out != "Password updated\n" {
		t.Fatalf("user passwd printed %q", out)
	}
	r.expectError("Error: etcdserver: authentication failed, invalid user ID or password", u1, "get", "foo")
	u1 = "--user=u1:p2"
	r.expect("foo\nv1\n", u1, "get", "foo")

	// Revocations take effect at once.
	r.expect("Permission of key foo is revoked from role r1\n", rootUser, "role", "revoke-permission", "r1", "foo")
	r.expectError("Error: etcdserver: permission denied", u1, "get", "foo")
	r.expect("Permission of range [pre/, pre0) is revoked from role r1\n", rootUser, "role", "revoke-permission", "r1", "--prefix", "pre/")
	r.expectError("Error: etcdserver: permission is not granted to the role", rootUser, "role", "revoke-permission", "r1", "--prefix", "pre/")
	r.expect("Role r1 is revoked from user u1\n", rootUser, "user", "revoke-role", "u1", "r1")
	r.expectError("Error: etcdserver: role is not granted to the user", rootUser, "user", "revoke-role", "u1", "r1")
	r.expectError("Error: etcdserver: permission denied", u1, "get", "a", "c")
	r.expect("Role r1 deleted\n", rootUser, "role", "delete", "r1")
	r.expect("User nopw deleted\n", rootUser, "user", "delete", "nopw")
	r.expectError("Error: etcdserver: user name not found", rootUser, "user", "delete", "nopw")
	r.expectError("Error: etcdserver: role name not found", rootUser, "role", "get", "r1")
	r.expect("Authentication Disabled\n", rootUser, "auth", "disable")
	r.expect("Authentication Status: false\nAuthRevision: 20\n", "auth", "status")
	r.expect("foo\nv1\n", "get", "foo")
}
