package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
	"github.com/metastore-io/metastore/pkg/concurrency/v3lockpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// limitedSetup starts a member with auth on, root, and user "u" that may
// read and write [mine/, mine0) and only write [wo/, wo0).
func limitedSetup(ctx context.Context, t *testing.T) (*server, *clientv3.Client, *clientv3.Client) {
	t.Helper()
	s := startServer(t, anonymousCapable(framework.ClusterConfig{}))
	addUserWithRole(ctx, t, s.cli, "u",
		perm(clientv3.PermReadWrite, "mine/", "mine0"),
		perm(clientv3.PermWrite, "wo/", "wo0"))
	enableAuthWithRoot(ctx, t, s.cluster, s.cli)
	root := clientAs(t, s.cluster, s.cluster.ClientURLs(), "root", authRootPassword)
	u := clientAs(t, s.cluster, s.cluster.ClientURLs(), "u", authUserPassword)
	return s, root, u
}

// TestAuthNestedTxnEscalation: every compare and operation of every
// nested txn is checked, in the branch that runs and the one that does not
// (the bypass fixed as CVE-2026-33343), and a refused txn writes nothing.
func TestAuthNestedTxnEscalation(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	_, root, u := limitedSetup(ctx, t)
	kv := pb.NewKVClient(u.ActiveConnection())
	denied := []*pb.TxnRequest{
		{Success: []*pb.RequestOp{kvstoretest.OpTxn(&pb.TxnRequest{Failure: []*pb.RequestOp{putOp("secret", "x")}})}},
		{Failure: []*pb.RequestOp{kvstoretest.OpTxn(&pb.TxnRequest{Success: []*pb.RequestOp{kvstoretest.OpTxn(&pb.TxnRequest{Success: []*pb.RequestOp{putOp("secret", "x")}})}})}},
		{Success: []*pb.RequestOp{putOp("mine/a", "x"), kvstoretest.OpTxn(&pb.TxnRequest{Success: []*pb.RequestOp{rangeOp("secret")}})}},
		{Compare: []*pb.Compare{{Key: []byte("secret"), Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL}}, Success: []*pb.RequestOp{putOp("mine/a", "x")}},
		{Success: []*pb.RequestOp{kvstoretest.OpTxn(&pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("secret"), Target: pb.Compare_VERSION}}})}},
		{Success: []*pb.RequestOp{rangeOp("wo/x")}}, // read-only txn, write-only key
		{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("wo/x"), PrevKv: true}}}}}, // prev_kv needs read
		{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("wo/"), RangeEnd: []byte("wo0"), PrevKv: true}}}}},
	}
	for i, r := range denied {
		_, err := kv.Txn(ctx, r)
		if err == nil {
			t.Fatalf("txn %d: allowed", i)
		}
		requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	}
	if resp := mustGet(ctx, t, root, "", clientv3.WithFromKey()); resp.Count != 0 {
		t.Fatalf("refused txns wrote %d keys", resp.Count)
	}
	ok := &pb.TxnRequest{
		Compare: []*pb.Compare{{Key: []byte("mine/a"), Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL}},
		Success: []*pb.RequestOp{putOp("mine/a", "x"), kvstoretest.OpTxn(&pb.TxnRequest{Success: []*pb.RequestOp{putOp("wo/x", "x"), rangeOp("mine/a")}})},
	}
	if resp := mustTxn(ctx, t, kv, ok); !resp.Succeeded {
		t.Fatal("permitted txn did not succeed")
	}
	// Plain requests: prev_kv needs read.
	_, err := u.Put(ctx, "wo/y", "v", clientv3.WithPrevKV())
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = u.Delete(ctx, "wo/", clientv3.WithPrefix(), clientv3.WithPrevKV())
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	if _, err := u.Delete(ctx, "wo/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	_, err = u.Get(ctx, "wo/x")
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
}

// TestAuthWatchRange: a watch on a range the user may not read is refused
// at creation; a permitted watch never sees keys outside its range.
func TestAuthWatchRange(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	_, root, u := limitedSetup(ctx, t)
	for _, c := range []struct{ key, end string }{
		{"secret", ""},
		{"", "\x00"},
		{"mine", "minf"}, // wider than mine/
		{"wo/", "wo0"},   // write-only
	} {
		reason := firstWatchResponse(ctx, t, u, &pb.WatchCreateRequest{Key: []byte(c.key), RangeEnd: []byte(c.end)}).CancelReason
		if reason != "rpc error: code = PermissionDenied desc = etcdserver: permission denied" {
			t.Fatalf("watch [%q, %q): cancel reason %q, want a permission refusal", c.key, c.end, reason)
		}
	}
	wch := u.Watch(ctx, "mine/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if wr := <-wch; !wr.Created {
		t.Fatalf("permitted watch not created: %+v", wr)
	}
	mustPut(ctx, t, root, "mine0", "outside")
	mustPut(ctx, t, root, "secret", "outside")
	mustPut(ctx, t, root, "mine/ok", "inside")
	wr := <-wch
	if len(wr.Events) != 1 || string(wr.Events[0].Kv.Key) != "mine/ok" {
		t.Fatalf("permitted watch got %+v, want only mine/ok", wr.Events)
	}
}

// firstWatchResponse opens a watch stream as cli and returns the answer
// to one create request.
func firstWatchResponse(ctx context.Context, t *testing.T, cli *clientv3.Client, r *pb.WatchCreateRequest) *pb.WatchResponse {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// clientv3 adds the token to every stream it opens on its connection.
	stream, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: r}}); err != nil {
		t.Fatal(err)
	}
	wr, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return wr
}

// TestAuthLeaseKeys: a lease holding a key the user may not write cannot
// be revoked, kept alive or extended by the user, and its keys are not
// revealed to it.
func TestAuthLeaseKeys(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	_, root, u := limitedSetup(ctx, t)
	grant, err := root.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(ctx, t, root, "secret", "v", clientv3.WithLease(grant.ID))

	_, err = u.Revoke(ctx, grant.ID)
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = u.TimeToLive(ctx, grant.ID, clientv3.WithAttachedKeys())
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	if ttl, err := u.TimeToLive(ctx, grant.ID); err != nil || len(ttl.Keys) != 0 {
		t.Fatalf("time-to-live without keys: %v %v", ttl, err)
	}
	_, err = u.Put(ctx, "mine/k", "v", clientv3.WithLease(grant.ID))
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = u.KeepAliveOnce(ctx, grant.ID)
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = u.Leases(ctx)
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)

	// The user's own lease works end to end.
	own, err := u.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(ctx, t, u, "mine/k", "v", clientv3.WithLease(own.ID))
	if _, err := u.KeepAliveOnce(ctx, own.ID); err != nil {
		t.Fatal(err)
	}
	if ttl, err := u.TimeToLive(ctx, own.ID, clientv3.WithAttachedKeys()); err != nil || len(ttl.Keys) != 1 {
		t.Fatalf("own lease keys: %v %v", ttl, err)
	}
	if _, err := u.Revoke(ctx, own.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Revoke(ctx, grant.ID); err != nil {
		t.Fatal(err)
	}
	if resp := mustGet(ctx, t, root, "secret"); resp.Count != 0 {
		t.Fatal("root's revoke left the key")
	}
}

// TestAuthRootOnly: maintenance and cluster operations reserved for root,
// and those any user (but no anonymous caller) may make.
func TestAuthRootOnly(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	s, root, u := limitedSetup(ctx, t)
	ep := s.member().Endpoint()
	_, err := u.Compact(ctx, 1)
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = u.Defragment(ctx, ep)
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = u.HashKV(ctx, ep, 0)
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = pb.NewMaintenanceClient(u.ActiveConnection()).Hash(ctx, &pb.HashRequest{})
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = u.MoveLeader(ctx, 1)
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = u.MemberAdd(ctx, []string{"http://127.0.0.1:1"})
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	_, err = u.MemberRemove(ctx, 1)
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)
	rc, err := u.Snapshot(ctx)
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "etcdserver: permission denied") {
		t.Fatalf("snapshot as a user: %v", err)
	}
	_, err = pb.NewMaintenanceClient(u.ActiveConnection()).Alarm(ctx,
		&pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: 1, Alarm: pb.AlarmType_NOSPACE})
	requireAuthError(t, err, rpctypes.ErrGRPCPermissionDenied)

	if _, err := u.Status(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if _, err := u.AlarmList(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := u.MemberList(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := root.HashKV(ctx, ep, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Compact(ctx, 1); err != nil {
		t.Fatal(err)
	}
	anon := s.cluster.NewClient(t)
	_, err = anon.Status(ctx, ep)
	requireAuthError(t, err, rpctypes.ErrGRPCUserEmpty)
	_, err = anon.Grant(ctx, 60)
	requireAuthError(t, err, rpctypes.ErrGRPCUserEmpty)
	_, err = anon.AlarmList(ctx)
	requireAuthError(t, err, rpctypes.ErrGRPCUserEmpty)
	wr := firstWatchResponse(ctx, t, anon, &pb.WatchCreateRequest{Key: []byte("mine/")})
	if !wr.Canceled || !wr.Created || wr.WatchId != -1 || wr.CancelReason != "rpc error: code = InvalidArgument desc = etcdserver: user name is empty" {
		t.Fatalf("anonymous watch: %+v", wr)
	}
	_, err = pb.NewKVClient(anon.ActiveConnection()).Range(withToken(ctx, "forged.1"), &pb.RangeRequest{Key: []byte("mine/a")})
	requireAuthError(t, err, rpctypes.ErrGRPCInvalidAuthToken)
}

// TestAuthGateway: the JSON gateway passes the Authorization header as
// the token; without it a request is nobody's.
func TestAuthGateway(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	s, _, _ := limitedSetup(ctx, t)
	base := s.member().ClientURL()
	httpc := s.member().HTTPClient(t)
	post := func(path, token, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s: decode: %v", path, err)
		}
		return resp.StatusCode, out
	}
	// "mine/a" and "c2VjcmV0" ("secret") in base64.
	code, out := post("/v3/kv/put", "", `{"key":"bWluZS9h","value":"dg=="}`)
	if code != http.StatusBadRequest || out["message"] != "etcdserver: user name is empty" || out["code"] != float64(3) {
		t.Fatalf("put without a token: %d %v", code, out)
	}
	code, out = post("/v3/auth/authenticate", "", `{"name":"u","password":"`+authUserPassword+`"}`)
	token, _ := out["token"].(string)
	if code != http.StatusOK || token == "" {
		t.Fatalf("authenticate: %d %v", code, out)
	}
	if code, out = post("/v3/kv/put", token, `{"key":"bWluZS9h","value":"dg=="}`); code != http.StatusOK {
		t.Fatalf("put with the token: %d %v", code, out)
	}
	code, out = post("/v3/kv/range", token, `{"key":"c2VjcmV0"}`)
	if code != http.StatusForbidden || out["message"] != "etcdserver: permission denied" {
		t.Fatalf("range of a forbidden key: %d %v", code, out)
	}
	code, out = post("/v3/kv/range", "bogus.7", `{"key":"bWluZS9h"}`)
	if code != http.StatusUnauthorized || out["message"] != "etcdserver: invalid auth token" {
		t.Fatalf("range with a bogus token: %d %v", code, out)
	}
}

// TestAuthLock: the Lock service acts as its caller: a lock under a
// prefix the user may write works, others are refused, and an anonymous
// caller is nobody.
func TestAuthLock(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	s, _, u := limitedSetup(ctx, t)
	lock := v3lockpb.NewLockClient(u.ActiveConnection())
	held, err := lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("mine/lock")})
	if err != nil {
		t.Fatalf("lock under a permitted prefix: %v", err)
	}
	if _, err := lock.Unlock(ctx, &v3lockpb.UnlockRequest{Key: held.Key}); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("secret")}); err == nil || !strings.Contains(err.Error(), "etcdserver: permission denied") {
		t.Fatalf("lock under a forbidden prefix: %v", err)
	}
	anon := v3lockpb.NewLockClient(s.cluster.NewClient(t).ActiveConnection())
	if _, err := anon.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("mine/lock")}); err == nil || !strings.Contains(err.Error(), "etcdserver: user name is empty") {
		t.Fatalf("anonymous lock: %v", err)
	}
}
