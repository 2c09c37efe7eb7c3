package auth

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/metadata"
)

func incoming(md map[string]string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.New(md))
}

func TestEnableNeedsRootWithRootRole(t *testing.T) {
	aux := newMemAux()
	s := newTestStore(t, aux, Options{})
	wantErr(t, s.ApplyAuthEnable(aux), ErrRootUserNotExist)
	addUser(t, s, aux, "root", "pw")
	wantErr(t, s.ApplyAuthEnable(aux), ErrRootRoleNotExist)
	mustOK(t, s.ApplyUserGrantRole(aux, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}))
	rev := s.Revision()
	mustOK(t, s.ApplyAuthEnable(aux))
	if !s.IsAuthEnabled() || s.Revision() != rev {
		t.Fatalf("enabled=%v rev=%d, want enabled at unchanged rev %d", s.IsAuthEnabled(), s.Revision(), rev)
	}
	// While enabled, root and its role are protected.
	wantErr(t, s.ApplyUserDelete(aux, &pb.AuthUserDeleteRequest{Name: "root"}), ErrInvalidAuthMgmt)
	wantErr(t, s.ApplyUserRevokeRole(aux, &pb.AuthUserRevokeRoleRequest{Name: "root", Role: "root"}), ErrInvalidAuthMgmt)
	wantErr(t, s.ApplyRoleDelete(aux, &pb.AuthRoleDeleteRequest{Role: "root"}), ErrInvalidAuthMgmt)
	s.ApplyAuthDisable(aux)
	if s.IsAuthEnabled() || s.Revision() != rev+1 {
		t.Fatalf("after disable enabled=%v rev=%d, want disabled at %d", s.IsAuthEnabled(), s.Revision(), rev+1)
	}
}

func TestUserAndRoleManagementErrors(t *testing.T) {
	aux := newMemAux()
	s := newTestStore(t, aux, Options{})
	if s.Revision() != 1 {
		t.Fatalf("fresh store at auth revision %d, want 1", s.Revision())
	}
	wantErr(t, s.ApplyUserAdd(aux, &pb.AuthUserAddRequest{}), ErrUserEmpty)
	addUser(t, s, aux, "u", "pw")
	wantErr(t, s.ApplyUserAdd(aux, &pb.AuthUserAddRequest{Name: "u", HashedPassword: "x"}), ErrUserAlreadyExist)
	wantErr(t, s.ApplyUserAdd(aux, &pb.AuthUserAddRequest{Name: "p", Password: "plain"}), ErrNoPasswordUser)
	wantErr(t, s.ApplyRoleAdd(aux, &pb.AuthRoleAddRequest{}), ErrRoleEmpty)
	mustOK(t, s.ApplyRoleAdd(aux, &pb.AuthRoleAddRequest{Name: "r"}))
	wantErr(t, s.ApplyRoleAdd(aux, &pb.AuthRoleAddRequest{Name: "r"}), ErrRoleAlreadyExist)
	wantErr(t, s.ApplyUserGrantRole(aux, &pb.AuthUserGrantRoleRequest{User: "nobody", Role: "r"}), ErrUserNotFound)
	wantErr(t, s.ApplyUserGrantRole(aux, &pb.AuthUserGrantRoleRequest{User: "u", Role: "nope"}), ErrRoleNotFound)
	mustOK(t, s.ApplyUserGrantRole(aux, &pb.AuthUserGrantRoleRequest{User: "u", Role: "r"}))
	rev := s.Revision()
	mustOK(t, s.ApplyUserGrantRole(aux, &pb.AuthUserGrantRoleRequest{User: "u", Role: "r"}))
	if s.Revision() != rev {
		t.Fatal("granting a role the user has moved the revision")
	}
	wantErr(t, s.ApplyUserRevokeRole(aux, &pb.AuthUserRevokeRoleRequest{Name: "u", Role: "other"}), ErrRoleNotGranted)
	wantErr(t, s.ApplyRoleGrantPermission(aux, &pb.AuthRoleGrantPermissionRequest{Name: "r"}), ErrPermissionNotGiven)
	wantErr(t, s.ApplyRoleGrantPermission(aux, &pb.AuthRoleGrantPermissionRequest{Name: "r",
		Perm: &authpb.Permission{Key: []byte("b"), RangeEnd: []byte("a")}}), ErrInvalidAuthMgmt)
	wantErr(t, s.ApplyRoleGrantPermission(aux, &pb.AuthRoleGrantPermissionRequest{Name: "nope",
		Perm: &authpb.Permission{Key: []byte("a")}}), ErrRoleNotFound)
	grant(t, s, aux, "r", authpb.READ, "k", "")
	grant(t, s, aux, "r", authpb.WRITE, "k", "") // updates the type in place
	grant(t, s, aux, "r", authpb.READ, "a", "\x00")
	perms, err := s.RoleGet("r")
	mustOK(t, err)
	if len(perms) != 2 || string(perms[0].Key) != "a" || perms[1].PermType != authpb.WRITE {
		t.Fatalf("role permissions %v, want [a.. READ, k WRITE]", perms)
	}
	wantErr(t, s.ApplyRoleRevokePermission(aux, &pb.AuthRoleRevokePermissionRequest{Role: "r", Key: []byte("zz")}), ErrPermissionNotGranted)
	mustOK(t, s.ApplyRoleRevokePermission(aux, &pb.AuthRoleRevokePermissionRequest{Role: "r", Key: []byte("k")}))
	mustOK(t, s.ApplyRoleDelete(aux, &pb.AuthRoleDeleteRequest{Role: "r"}))
	roles, err := s.UserGet("u")
	mustOK(t, err)
	if len(roles) != 0 {
		t.Fatalf("deleting a role left it granted: %v", roles)
	}
	_, err = s.UserGet("nobody")
	wantErr(t, err, ErrUserNotFound)
	_, err = s.RoleGet("r")
	wantErr(t, err, ErrRoleNotFound)
}

func TestPermissionChecks(t *testing.T) {
	aux := newMemAux()
	s := newTestStore(t, aux, Options{})
	enableWithRoot(t, s, aux)
	addUser(t, s, aux, "u", "pw")
	mustOK(t, s.ApplyRoleAdd(aux, &pb.AuthRoleAddRequest{Name: "r"}))
	grant(t, s, aux, "r", authpb.READWRITE, "foo", "")
	grant(t, s, aux, "r", authpb.READ, "a", "c")
	grant(t, s, aux, "r", authpb.READ, "c", "e") // adjacent: [a, e) together
	grant(t, s, aux, "r", authpb.WRITE, "w/", "\x00")
	mustOK(t, s.ApplyUserGrantRole(aux, &pb.AuthUserGrantRoleRequest{User: "u", Role: "r"}))
	u := login(t, s, "u", "pw", 1)
	root := login(t, s, "root", "rootpw", 2)

	cases := []struct {
		name string
		err  error
		want error
	}{
		{"read own key", s.IsRangePermitted(u, []byte("foo"), nil), nil},
		{"read other key", s.IsRangePermitted(u, []byte("fop"), nil), ErrPermissionDenied},
		{"read covered range", s.IsRangePermitted(u, []byte("a"), []byte("e")), nil},
		{"read range past grant", s.IsRangePermitted(u, []byte("a"), []byte("f")), ErrPermissionDenied},
		{"read from key", s.IsRangePermitted(u, []byte("a"), []byte{0}), ErrPermissionDenied},
		{"write open range", s.IsDeleteRangePermitted(u, []byte("w/x"), []byte{0}), nil},
		{"write read-only key", s.IsPutPermitted(u, []byte("b")), ErrPermissionDenied},
		{"no credentials", s.IsRangePermitted(&AuthInfo{}, []byte("foo"), nil), ErrUserEmpty},
		{"unknown user", s.IsRangePermitted(&AuthInfo{Username: "x", Revision: s.Revision()}, []byte("foo"), nil), ErrPermissionDenied},
		{"root anything", s.IsDeleteRangePermitted(root, []byte{0}, []byte{0}), nil},
		{"admin non-root", s.IsAdminPermitted(u), ErrPermissionDenied},
		{"admin empty", s.IsAdminPermitted(&AuthInfo{}), ErrUserEmpty},
		{"admin unknown", s.IsAdminPermitted(&AuthInfo{Username: "x"}), ErrUserNotFound},
		{"prev_kv needs read", s.CheckPut(u, noLeases, &pb.PutRequest{Key: []byte("w/1"), PrevKv: true}), ErrPermissionDenied},
		{"put write-only", s.CheckPut(u, noLeases, &pb.PutRequest{Key: []byte("w/1")}), nil},
	}
	for _, c := range cases {
		if c.err != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
	}

	// A revision change makes the old credentials stale.
	mustOK(t, s.ApplyRoleAdd(aux, &pb.AuthRoleAddRequest{Name: "later"}))
	wantErr(t, s.IsRangePermitted(u, []byte("foo"), nil), ErrAuthOldRevision)
}

func noLeases(int64) [][]byte { return nil }

func TestTxnChecksEveryNestedOp(t *testing.T) {
	aux := newMemAux()
	s := newTestStore(t, aux, Options{})
	enableWithRoot(t, s, aux)
	addUser(t, s, aux, "u", "pw")
	mustOK(t, s.ApplyRoleAdd(aux, &pb.AuthRoleAddRequest{Name: "r"}))
	grant(t, s, aux, "r", authpb.READWRITE, "mine/", "mine0")
	mustOK(t, s.ApplyUserGrantRole(aux, &pb.AuthUserGrantRoleRequest{User: "u", Role: "r"}))
	u := login(t, s, "u", "pw", 1)
	put := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
	}
	nested := func(ops ...*pb.RequestOp) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Failure: ops}}}
	}
	ok := &pb.TxnRequest{Success: []*pb.RequestOp{put("mine/a"), nested(put("mine/b"))}}
	mustOK(t, s.CheckTxn(u, noLeases, ok))
	// The forbidden put hides in the failure branch of a txn nested in
	// the success branch: it is checked although it may never run.
	bad := &pb.TxnRequest{Success: []*pb.RequestOp{nested(nested(put("secret")))}}
	wantErr(t, s.CheckTxn(u, noLeases, bad), ErrPermissionDenied)
	cmp := &pb.TxnRequest{Compare: []*pb.Compare{{Key: []byte("secret")}}}
	wantErr(t, s.CheckTxn(u, noLeases, cmp), ErrPermissionDenied)
	leased := func(int64) [][]byte { return [][]byte{[]byte("secret")} }
	wantErr(t, s.CheckPut(u, leased, &pb.PutRequest{Key: []byte("mine/x"), Lease: 7}), ErrPermissionDenied)
	wantErr(t, s.CheckLeasePuts(u, leased, 7), ErrPermissionDenied)
	wantErr(t, s.CheckLeaseReads(u, leased, 7), ErrPermissionDenied)
}

func TestRecordsSurviveReload(t *testing.T) {
	aux := newMemAux()
	s := newTestStore(t, aux, Options{})
	enableWithRoot(t, s, aux)
	mustOK(t, s.ApplyRoleAdd(aux, &pb.AuthRoleAddRequest{Name: "r"}))
	grant(t, s, aux, "r", authpb.READ, "k", "")
	mustOK(t, s.ApplyUserAdd(aux, &pb.AuthUserAddRequest{Name: "np", Options: &authpb.UserAddOptions{NoPassword: true}}))
	mustOK(t, s.ApplyUserGrantRole(aux, &pb.AuthUserGrantRoleRequest{User: "np", Role: "r"}))
	rev := s.Revision()

	s2 := newTestStore(t, aux, Options{})
	if !s2.IsAuthEnabled() || s2.Revision() != rev {
		t.Fatalf("reloaded enabled=%v rev=%d, want true %d", s2.IsAuthEnabled(), s2.Revision(), rev)
	}
	if got := s2.UserList(); len(got) != 2 || got[0] != "np" || got[1] != "root" {
		t.Fatalf("users %v", got)
	}
	if _, err := s2.CheckPassword("root", "rootpw"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, func() error { _, err := s2.CheckPassword("root", "bad"); return err }(), ErrAuthFailed)
	wantErr(t, func() error { _, err := s2.CheckPassword("np", ""); return err }(), ErrNoPasswordUser)
	if err := s2.IsRangePermitted(&AuthInfo{Username: "np", Revision: rev}, []byte("k"), nil); err != nil {
		t.Fatal(err)
	}
	_, err := s2.ApplyAuthenticate("np", "p", 1)
	wantErr(t, err, ErrAuthFailed)
}

func TestSimpleTokens(t *testing.T) {
	aux := newMemAux()
	s := newTestStore(t, aux, Options{TokenTTL: time.Hour})
	enableWithRoot(t, s, aux)
	ai := login(t, s, "root", "rootpw", 5)
	if ai.Username != "root" || ai.Revision != s.Revision() {
		t.Fatalf("token names %+v", ai)
	}
	for _, bad := range []string{"", "x", "a.b", "a.1.2", "unknown.5"} {
		if _, err := s.AuthInfoFromCtx(tokenCtx(bad)); err != ErrInvalidAuthToken {
			t.Errorf("token %q: got %v, want ErrInvalidAuthToken", bad, err)
		}
	}
	// The JSON gateway's Authorization header, with or without Bearer.
	prefix, _ := s.GenTokenPrefix()
	tok, err := s.ApplyAuthenticate("root", prefix, 6)
	mustOK(t, err)
	if got, err := s.AuthInfoFromCtx(incoming(map[string]string{"authorization": "Bearer " + tok})); err != nil || got.Username != "root" {
		t.Fatalf("gateway token: %+v %v", got, err)
	}
	// A password change drops the user's tokens.
	h, _ := s.HashPassword("new")
	mustOK(t, s.ApplyUserChangePassword(aux, &pb.AuthUserChangePasswordRequest{Name: "root", HashedPassword: h}))
	wantErr(t, func() error { _, err := s.AuthInfoFromCtx(tokenCtx(tok)); return err }(), ErrInvalidAuthToken)
	// Disabling auth drops every token; a token context is then nobody.
	ai2 := login(t, s, "root", "new", 7)
	_ = ai2
	s.ApplyAuthDisable(aux)
	if got, err := s.AuthInfoFromCtx(tokenCtx(tok)); got != nil || err != nil {
		t.Fatalf("auth off: %+v %v", got, err)
	}
}

func TestSimpleTokenExpires(t *testing.T) {
	aux := newMemAux()
	s := newTestStore(t, aux, Options{TokenTTL: time.Nanosecond})
	enableWithRoot(t, s, aux)
	prefix, _ := s.GenTokenPrefix()
	tok, err := s.ApplyAuthenticate("root", prefix, 1)
	mustOK(t, err)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.AuthInfoFromCtx(tokenCtx(tok))
		if err == ErrInvalidAuthToken {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("token did not expire")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSimpleTokenWaitsForItsEntry(t *testing.T) {
	aux := newMemAux()
	applied := make(chan struct{})
	s := newTestStore(t, aux, Options{WaitApplied: func(ctx context.Context, i uint64) error {
		select {
		case <-applied:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	enableWithRoot(t, s, aux)
	ctx, cancel := context.WithTimeout(tokenCtx("abcdefghabcdefgh.9"), 50*time.Millisecond)
	defer cancel()
	if _, err := s.AuthInfoFromCtx(ctx); err != ErrInvalidAuthToken {
		t.Fatalf("unapplied token: got %v", err)
	}
	close(applied)
	mustOK(t, func() error { _, err := s.ApplyAuthenticate("root", "abcdefghabcdefgh", 9); return err }())
	if ai, err := s.AuthInfoFromCtx(tokenCtx("abcdefghabcdefgh.9")); err != nil || ai.Username != "root" {
		t.Fatalf("applied token: %+v %v", ai, err)
	}
}
