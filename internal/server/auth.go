package server

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/auth"
)

// The Auth service's requests. Every one goes through Raft as etcd's do
// (the reads too, so they see every change committed before them), with
// the caller's user and auth revision in the entry's header; apply checks
// them (internal/statemachine). Only Authenticate checks a password, here on the
// receiving member, and proposes no password.

// Auth is the member's auth store (users, roles, tokens, checks).
func (s *Server) Auth() *auth.Store { return s.auth }

// AuthInfo is who a request is from (auth.Store.AuthInfoFromCtx).
func (s *Server) AuthInfo(ctx context.Context) (*auth.AuthInfo, error) {
	return s.auth.AuthInfoFromCtx(ctx)
}

// LeaseKeys lists the keys attached to a lease (nil: no such lease).
func (s *Server) LeaseKeys(id int64) [][]byte { return s.leases.lessor.Keys(id) }

// internalRootKey marks the context of a proposal the member makes on its
// own behalf (the revocation of an expired lease): it is stamped as the
// root user, as etcd's WithRoot does, so it passes the checks of apply.
type internalRootKey struct{}

func withInternalRoot(ctx context.Context) context.Context {
	return context.WithValue(ctx, internalRootKey{}, true)
}

// stampAuth records in req's header who the proposal is for: the user of
// the caller's token or certificate and the auth revision it was checked
// at. An invalid token fails the request before it is proposed.
func (s *Server) stampAuth(ctx context.Context, req *pb.InternalRaftRequest) error {
	if req.Authenticate != nil {
		return nil
	}
	if ctx.Value(internalRootKey{}) != nil {
		req.Header.Username = "root"
		req.Header.AuthRevision = s.auth.Revision()
		return nil
	}
	ai, err := s.auth.AuthInfoFromCtx(ctx)
	if err != nil {
		return err
	}
	if ai != nil {
		req.Header.Username = ai.Username
		req.Header.AuthRevision = ai.Revision
	}
	return nil
}

// proposeAuth proposes an auth request and returns its response.
func proposeAuth[T any](s *Server, ctx context.Context, req *pb.InternalRaftRequest) (T, error) {
	var zero T
	res, err := s.propose(ctx, req)
	if err != nil {
		return zero, err
	}
	return res.Resp.(T), nil
}

// AuthEnable turns authentication on.
func (s *Server) AuthEnable(ctx context.Context, r *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	return proposeAuth[*pb.AuthEnableResponse](s, ctx, &pb.InternalRaftRequest{AuthEnable: r})
}

// AuthDisable turns authentication off.
func (s *Server) AuthDisable(ctx context.Context, r *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	return proposeAuth[*pb.AuthDisableResponse](s, ctx, &pb.InternalRaftRequest{AuthDisable: r})
}

// AuthStatus reports whether authentication is on, and the auth revision.
func (s *Server) AuthStatus(ctx context.Context, r *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return proposeAuth[*pb.AuthStatusResponse](s, ctx, &pb.InternalRaftRequest{AuthStatus: r})
}

// Authenticate checks a user's password and issues a token. The password
// is checked here, against the linearizable state; the proposal carries
// only the user name and the simple token's random prefix. If the auth
// revision moved while the token was issued, the password is checked
// again (the user may have been changed or deleted meanwhile).
func (s *Server) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	// The password is a credential: it is not kept once checked
	// (CVE-2021-28235).
	defer func() { r.Password = "" }()
	if err := s.LinearizableRead(ctx); err != nil {
		return nil, err
	}
	for {
		checked, err := s.auth.CheckPassword(r.Name, r.Password)
		if err != nil {
			if !errors.Is(err, auth.ErrAuthNotEnabled) {
				s.log.Warn("invalid authentication was requested", "user", r.Name, "error", err)
			}
			return nil, err
		}
		prefix, err := s.auth.GenTokenPrefix()
		if err != nil {
			return nil, err
		}
		resp, err := proposeAuth[*pb.AuthenticateResponse](s, ctx, &pb.InternalRaftRequest{
			Authenticate: &pb.InternalAuthenticateRequest{Name: r.Name, SimpleToken: prefix},
		})
		if err != nil {
			return nil, err
		}
		if checked == s.auth.Revision() {
			return resp, nil
		}
		s.log.Info("revision when password checked became stale; retrying")
	}
}

// hashInto replaces a request's password by its bcrypt hash (base64).
func (s *Server) hashInto(password *string, hashed *string) error {
	h, err := s.auth.HashPassword(*password)
	if err != nil {
		return err
	}
	*hashed, *password = h, ""
	return nil
}

// UserAdd adds a user; the password is hashed before proposing.
func (s *Server) UserAdd(ctx context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	if r.Options == nil || !r.Options.NoPassword {
		if err := s.hashInto(&r.Password, &r.HashedPassword); err != nil {
			return nil, err
		}
	}
	return proposeAuth[*pb.AuthUserAddResponse](s, ctx, &pb.InternalRaftRequest{AuthUserAdd: r})
}

// UserDelete deletes a user.
func (s *Server) UserDelete(ctx context.Context, r *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	return proposeAuth[*pb.AuthUserDeleteResponse](s, ctx, &pb.InternalRaftRequest{AuthUserDelete: r})
}

// UserChangePassword changes a user's password; hashed before proposing.
func (s *Server) UserChangePassword(ctx context.Context, r *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
	if err := s.hashInto(&r.Password, &r.HashedPassword); err != nil {
		return nil, err
	}
	return proposeAuth[*pb.AuthUserChangePasswordResponse](s, ctx, &pb.InternalRaftRequest{AuthUserChangePassword: r})
}

// UserGrantRole grants a role to a user.
func (s *Server) UserGrantRole(ctx context.Context, r *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	return proposeAuth[*pb.AuthUserGrantRoleResponse](s, ctx, &pb.InternalRaftRequest{AuthUserGrantRole: r})
}

// UserGet lists a user's roles.
func (s *Server) UserGet(ctx context.Context, r *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	return proposeAuth[*pb.AuthUserGetResponse](s, ctx, &pb.InternalRaftRequest{AuthUserGet: r})
}

// UserList lists the users.
func (s *Server) UserList(ctx context.Context, r *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	return proposeAuth[*pb.AuthUserListResponse](s, ctx, &pb.InternalRaftRequest{AuthUserList: r})
}

// UserRevokeRole revokes a role from a user.
func (s *Server) UserRevokeRole(ctx context.Context, r *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	return proposeAuth[*pb.AuthUserRevokeRoleResponse](s, ctx, &pb.InternalRaftRequest{AuthUserRevokeRole: r})
}

// RoleAdd adds a role.
func (s *Server) RoleAdd(ctx context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	return proposeAuth[*pb.AuthRoleAddResponse](s, ctx, &pb.InternalRaftRequest{AuthRoleAdd: r})
}

// RoleGrantPermission grants a key-range permission to a role.
func (s *Server) RoleGrantPermission(ctx context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	return proposeAuth[*pb.AuthRoleGrantPermissionResponse](s, ctx, &pb.InternalRaftRequest{AuthRoleGrantPermission: r})
}

// RoleGet lists a role's permissions.
func (s *Server) RoleGet(ctx context.Context, r *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	return proposeAuth[*pb.AuthRoleGetResponse](s, ctx, &pb.InternalRaftRequest{AuthRoleGet: r})
}

// RoleList lists the roles.
func (s *Server) RoleList(ctx context.Context, r *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	return proposeAuth[*pb.AuthRoleListResponse](s, ctx, &pb.InternalRaftRequest{AuthRoleList: r})
}

// RoleRevokePermission revokes a key-range permission from a role.
func (s *Server) RoleRevokePermission(ctx context.Context, r *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	return proposeAuth[*pb.AuthRoleRevokePermissionResponse](s, ctx, &pb.InternalRaftRequest{AuthRoleRevokePermission: r})
}

// RoleDelete deletes a role.
func (s *Server) RoleDelete(ctx context.Context, r *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	return proposeAuth[*pb.AuthRoleDeleteResponse](s, ctx, &pb.InternalRaftRequest{AuthRoleDelete: r})
}

// authorizeRead runs a local read (Range, read-only Txn) under etcd's
// doSerialize rule: check the caller's permission, read, then fail with
// ErrAuthOldRevision if the auth revision moved meanwhile, so a read never
// returns data a concurrent revocation already forbade.
//
// check gets nil for a caller without credentials (always, with
// authentication off): the auth store's checks take nil as no user, so
// a read allocates no empty AuthInfo.
func (s *Server) authorizeRead(ctx context.Context, check func(*auth.AuthInfo) error, read func() error) error {
	ai, err := s.auth.AuthInfoFromCtx(ctx)
	if err != nil {
		return err
	}
	if err := check(ai); err != nil {
		return err
	}
	readErr := read()
	if ai != nil && ai.Revision != 0 && ai.Revision != s.auth.Revision() {
		return auth.ErrAuthOldRevision
	}
	return readErr
}

// The checks etcd makes in its API layer (pkg/etcdcompat's
// AuthMember): root-only methods, methods for any user, lease keys and
// watch ranges. Each is nil while authentication is off.

// AuthCheckAdmin checks that the caller has the root role.
func (s *Server) AuthCheckAdmin(ctx context.Context) error {
	ai, err := s.auth.AuthInfoFromCtx(ctx)
	if err != nil {
		return err
	}
	return s.auth.IsAdminPermitted(ai)
}

// requireUser is the caller, ErrUserEmpty without credentials; nil while
// auth is off.
func (s *Server) requireUser(ctx context.Context) (*auth.AuthInfo, error) {
	if !s.auth.IsAuthEnabled() {
		return nil, nil
	}
	ai, err := s.auth.AuthInfoFromCtx(ctx)
	if err != nil {
		return nil, err
	}
	if ai == nil {
		return nil, auth.ErrUserEmpty
	}
	return ai, nil
}

// AuthCheckUser checks that the caller is some user.
func (s *Server) AuthCheckUser(ctx context.Context) error {
	_, err := s.requireUser(ctx)
	return err
}

// AuthCheckLeases checks that the caller may write (write) or read every
// key attached to the leases, and returns the auth revision it checked at.
func (s *Server) AuthCheckLeases(ctx context.Context, write bool, ids ...int64) (uint64, error) {
	rev := s.auth.Revision()
	ai, err := s.requireUser(ctx)
	if err != nil || ai == nil {
		return rev, err
	}
	if write {
		for _, id := range ids {
			if err := s.auth.CheckLeaseRenew(ai, s.LeaseKeys, id); err != nil {
				return rev, err
			}
		}
		return rev, nil
	}
	return rev, s.auth.CheckLeaseReads(ai, s.LeaseKeys, ids...)
}

// AuthRevision is the auth revision and whether authentication is on.
func (s *Server) AuthRevision() (uint64, bool) {
	on, rev := s.auth.AuthStatus()
	return rev, on
}

// AuthCheckWatch checks that the caller may read the range of a watch.
// An empty key is the smallest key, "\x00", as etcd normalises it before
// checking.
func (s *Server) AuthCheckWatch(ctx context.Context, r *pb.WatchCreateRequest) error {
	ai, err := s.auth.AuthInfoFromCtx(ctx)
	if err != nil {
		return err
	}
	if ai == nil {
		ai = &auth.AuthInfo{}
	}
	key := r.Key
	if len(key) == 0 {
		key = []byte{0}
	}
	return s.auth.IsRangePermitted(ai, key, r.RangeEnd)
}

// AuthCertIdentity reports whether client certificates name users now
// (--client-cert-auth with auth on).
func (s *Server) AuthCertIdentity() bool { return s.auth.CertIdentity() }
