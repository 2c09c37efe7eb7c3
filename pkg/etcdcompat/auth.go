package etcdcompat

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/soheilhy/cmux"
	"net/http"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// AuthMember is a member with etcd's authentication: what the Auth
// service and the permission checks of the other services need from it.
// A Member that implements it gets both (NewClientServer); one that does
// not serves no Auth service and checks nothing.
type AuthMember interface {
	AuthEnable(ctx context.Context, r *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error)
	AuthDisable(ctx context.Context, r *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error)
	AuthStatus(ctx context.Context, r *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error)
	Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error)
	UserAdd(ctx context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error)
	UserDelete(ctx context.Context, r *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error)
	UserChangePassword(ctx context.Context, r *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error)
	UserGrantRole(ctx context.Context, r *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error)
	UserGet(ctx context.Context, r *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error)
	UserList(ctx context.Context, r *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error)
	UserRevokeRole(ctx context.Context, r *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error)
	RoleAdd(ctx context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error)
	RoleGrantPermission(ctx context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error)
	RoleGet(ctx context.Context, r *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error)
	RoleList(ctx context.Context, r *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error)
	RoleRevokePermission(ctx context.Context, r *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error)
	RoleDelete(ctx context.Context, r *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error)

	// The checks etcd makes in its API layer, before a request reaches
	// the member (authGuard). Each is nil while authentication is off;
	// the caller is named by ctx (its token, or its client certificate).
	//
	// AuthCheckAdmin: the caller has the root role.
	AuthCheckAdmin(ctx context.Context) error
	// AuthCheckUser: the caller is some user.
	AuthCheckUser(ctx context.Context) error
	// AuthCheckLeases: the caller is some user and may write (write) or
	// read every key attached to the leases ids; rev is the auth revision
	// the check was made at (see AuthRevision).
	AuthCheckLeases(ctx context.Context, write bool, ids ...int64) (rev uint64, err error)
	// AuthRevision is the current auth revision and whether
	// authentication is on: an answer computed under a check made at an
	// older revision must not be sent.
	AuthRevision() (rev uint64, enabled bool)
	// AuthCheckWatch: the caller may read the keys the watch would cover.
	AuthCheckWatch(ctx context.Context, r *pb.WatchCreateRequest) error
	// AuthCertIdentity reports whether client certificates name users
	// now (--client-cert-auth, auth on).
	AuthCertIdentity() bool
}

// gatewayCNRefusal is etcd's answer to a JSON gateway request over a
// client certificate with a Common Name while certificates name users:
// the gateway's own calls cannot carry the caller's certificate, so
// rather than silently ignore it etcd refuses the request.
const gatewayCNRefusal = "CommonName of client sending a request against gateway will be ignored and not used as expected"

// refuseGatewayCN wraps the JSON gateway with that refusal.
func refuseGatewayCN(am AuthMember, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		state := r.TLS
		if state == nil {
			state, _ = r.Context().Value(tlsStateKey{}).(*tls.ConnectionState)
		}
		if state != nil && am.AuthCertIdentity() {
			for _, chain := range state.VerifiedChains {
				if len(chain) > 0 && chain[0].Subject.CommonName != "" {
					http.Error(w, gatewayCNRefusal, http.StatusBadRequest)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// authService is etcd's Auth service.
type authService struct {
	pb.UnimplementedAuthServer
	srv AuthMember
	hdr headerFiller
}

// authCall runs one Auth request and fills its response header.
func authCall[Req any, Resp interface{ GetHeader() *pb.ResponseHeader }](
	a *authService, ctx context.Context, r Req, call func(context.Context, Req) (Resp, error)) (Resp, error) {
	resp, err := call(ctx, r)
	if err != nil {
		var zero Resp
		return zero, ToGRPCError(err)
	}
	a.hdr.fill(resp.GetHeader())
	return resp, nil
}

func (a *authService) AuthEnable(ctx context.Context, r *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	return authCall(a, ctx, r, a.srv.AuthEnable)
}

func (a *authService) AuthDisable(ctx context.Context, r *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	return authCall(a, ctx, r, a.srv.AuthDisable)
}

func (a *authService) AuthStatus(ctx context.Context, r *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return authCall(a, ctx, r, a.srv.AuthStatus)
}

func (a *authService) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	return authCall(a, ctx, r, a.srv.Authenticate)
}

func (a *authService) UserAdd(ctx context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	return authCall(a, ctx, r, a.srv.UserAdd)
}

func (a *authService) UserDelete(ctx context.Context, r *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	return authCall(a, ctx, r, a.srv.UserDelete)
}

func (a *authService) UserChangePassword(ctx context.Context, r *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
	return authCall(a, ctx, r, a.srv.UserChangePassword)
}

func (a *authService) UserGrantRole(ctx context.Context, r *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	return authCall(a, ctx, r, a.srv.UserGrantRole)
}

func (a *authService) UserGet(ctx context.Context, r *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	return authCall(a, ctx, r, a.srv.UserGet)
}

func (a *authService) UserList(ctx context.Context, r *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	return authCall(a, ctx, r, a.srv.UserList)
}

func (a *authService) UserRevokeRole(ctx context.Context, r *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	return authCall(a, ctx, r, a.srv.UserRevokeRole)
}

func (a *authService) RoleAdd(ctx context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	return authCall(a, ctx, r, a.srv.RoleAdd)
}

func (a *authService) RoleGrantPermission(ctx context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	return authCall(a, ctx, r, a.srv.RoleGrantPermission)
}

func (a *authService) RoleGet(ctx context.Context, r *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	return authCall(a, ctx, r, a.srv.RoleGet)
}

func (a *authService) RoleList(ctx context.Context, r *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	return authCall(a, ctx, r, a.srv.RoleList)
}

func (a *authService) RoleRevokePermission(ctx context.Context, r *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	return authCall(a, ctx, r, a.srv.RoleRevokePermission)
}

func (a *authService) RoleDelete(ctx context.Context, r *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	return authCall(a, ctx, r, a.srv.RoleDelete)
}

// tlsStateKey keys the TLS state of an HTTP request's connection in its
// context (withTLSState).
type tlsStateKey struct{}

// withTLSState is an http.Server's ConnContext: it records the state of
// the TLS connection under c, which cmux and other wrappers hide from
// net/http.
func withTLSState(ctx context.Context, c net.Conn) context.Context {
	for range 4 {
		switch conn := c.(type) {
		case *tls.Conn:
			st := conn.ConnectionState()
			return context.WithValue(ctx, tlsStateKey{}, &st)
		case *cmux.MuxConn:
			c = conn.Conn
		case *h2AckFilter:
			c = conn.Conn
		case interface{ NetConn() net.Conn }:
			c = conn.NetConn()
		default:
			return ctx
		}
	}
	return ctx
}
