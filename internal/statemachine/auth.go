package statemachine

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/auth"
)

// The state machine's side of authorisation (etcd's authApplierV3). The
// header of each entry names the user and the auth revision the proposer
// checked the credentials at; apply decides from that and the replicated
// auth state alone, so every member decides alike. A check that fails
// fails the request, which then changes nothing.

// entryAuthInfo is who proposed req.
func entryAuthInfo(req *pb.InternalRaftRequest) auth.AuthInfo {
	if req.Header == nil {
		return auth.AuthInfo{}
	}
	return auth.AuthInfo{Username: req.Header.Username, Revision: req.Header.AuthRevision}
}

// needAdminPermission lists the requests only a root-role user may make
// (UserGet and RoleGet are checked apart: a user may read itself and its
// roles).
func needAdminPermission(r *pb.InternalRaftRequest) bool {
	return r.AuthEnable != nil || r.AuthDisable != nil || r.AuthStatus != nil ||
		r.AuthUserAdd != nil || r.AuthUserDelete != nil || r.AuthUserChangePassword != nil ||
		r.AuthUserGrantRole != nil || r.AuthUserRevokeRole != nil ||
		r.AuthRoleAdd != nil || r.AuthRoleGrantPermission != nil || r.AuthRoleRevokePermission != nil ||
		r.AuthRoleDelete != nil || r.AuthUserList != nil || r.AuthRoleList != nil
}

// authorize checks req against the auth state before it applies; keys
// lists the keys attached to a lease (the lease table's).
func authorize(as *auth.Store, keys func(id int64) [][]byte, req *pb.InternalRaftRequest) error {
	ai := entryAuthInfo(req)
	switch {
	case needAdminPermission(req):
		return as.IsAdminPermitted(&ai)
	case req.Put != nil:
		return as.CheckPut(&ai, keys, req.Put)
	case req.DeleteRange != nil:
		return as.CheckDeleteRange(&ai, req.DeleteRange)
	case req.Txn != nil:
		return as.CheckTxn(&ai, keys, req.Txn)
	case req.LeaseRevoke != nil:
		return as.CheckLeasePuts(&ai, keys, req.LeaseRevoke.ID)
	case req.AuthUserGet != nil:
		if err := as.IsAdminPermitted(&ai); err != nil && req.AuthUserGet.Name != ai.Username {
			return err
		}
	case req.AuthRoleGet != nil:
		if err := as.IsAdminPermitted(&ai); err != nil && !as.HasRole(ai.Username, req.AuthRoleGet.Role) {
			return err
		}
	}
	return nil
}

// isAuthRequest reports whether req is one of the Auth service's.
func isAuthRequest(r *pb.InternalRaftRequest) bool {
	return needAdminPermission(r) || r.Authenticate != nil || r.AuthUserGet != nil || r.AuthRoleGet != nil
}

// applyAuth applies an Auth service request; index is the entry's raft
// index (part of a simple token).
func (sm *StateMachine) applyAuth(req *pb.InternalRaftRequest, index uint64) Result {
	as, w := sm.Auth, sm.KV
	hdr := &pb.ResponseHeader{}
	var resp any
	var err error
	switch {
	case req.AuthEnable != nil:
		err = as.ApplyAuthEnable(w)
		resp = &pb.AuthEnableResponse{Header: hdr}
	case req.AuthDisable != nil:
		as.ApplyAuthDisable(w)
		resp = &pb.AuthDisableResponse{Header: hdr}
	case req.AuthStatus != nil:
		enabled, rev := as.AuthStatus()
		resp = &pb.AuthStatusResponse{Header: hdr, Enabled: enabled, AuthRevision: rev}
	case req.Authenticate != nil && index <= sm.replayedUpTo:
		// A replay after a restart: the token was issued by the previous
		// process and, like etcd's, dies with it. Nobody waits for this
		// answer.
		resp = &pb.AuthenticateResponse{Header: hdr}
	case req.Authenticate != nil:
		var token string
		token, err = as.ApplyAuthenticate(req.Authenticate.Name, req.Authenticate.SimpleToken, index)
		resp = &pb.AuthenticateResponse{Header: hdr, Token: token}
	case req.AuthUserAdd != nil:
		err = as.ApplyUserAdd(w, req.AuthUserAdd)
		resp = &pb.AuthUserAddResponse{Header: hdr}
	case req.AuthUserDelete != nil:
		err = as.ApplyUserDelete(w, req.AuthUserDelete)
		resp = &pb.AuthUserDeleteResponse{Header: hdr}
	case req.AuthUserChangePassword != nil:
		err = as.ApplyUserChangePassword(w, req.AuthUserChangePassword)
		resp = &pb.AuthUserChangePasswordResponse{Header: hdr}
	case req.AuthUserGrantRole != nil:
		err = as.ApplyUserGrantRole(w, req.AuthUserGrantRole)
		resp = &pb.AuthUserGrantRoleResponse{Header: hdr}
	case req.AuthUserGet != nil:
		var roles []string
		roles, err = as.UserGet(req.AuthUserGet.Name)
		resp = &pb.AuthUserGetResponse{Header: hdr, Roles: roles}
	case req.AuthUserList != nil:
		resp = &pb.AuthUserListResponse{Header: hdr, Users: as.UserList()}
	case req.AuthUserRevokeRole != nil:
		err = as.ApplyUserRevokeRole(w, req.AuthUserRevokeRole)
		resp = &pb.AuthUserRevokeRoleResponse{Header: hdr}
	case req.AuthRoleAdd != nil:
		err = as.ApplyRoleAdd(w, req.AuthRoleAdd)
		resp = &pb.AuthRoleAddResponse{Header: hdr}
	case req.AuthRoleGrantPermission != nil:
		err = as.ApplyRoleGrantPermission(w, req.AuthRoleGrantPermission)
		resp = &pb.AuthRoleGrantPermissionResponse{Header: hdr}
	case req.AuthRoleGet != nil:
		r := &pb.AuthRoleGetResponse{Header: hdr}
		r.Perm, err = as.RoleGet(req.AuthRoleGet.Role)
		resp = r
	case req.AuthRoleList != nil:
		resp = &pb.AuthRoleListResponse{Header: hdr, Roles: as.RoleList()}
	case req.AuthRoleRevokePermission != nil:
		err = as.ApplyRoleRevokePermission(w, req.AuthRoleRevokePermission)
		resp = &pb.AuthRoleRevokePermissionResponse{Header: hdr}
	case req.AuthRoleDelete != nil:
		err = as.ApplyRoleDelete(w, req.AuthRoleDelete)
		resp = &pb.AuthRoleDeleteResponse{Header: hdr}
	}
	if err != nil {
		return Result{Err: err}
	}
	return Result{Resp: resp}
}
