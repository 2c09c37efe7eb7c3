package auth

import (
	"bytes"
	"context"
	"encoding/base64"
	"slices"
	"sort"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// The Apply* methods apply one committed auth request, on the apply
// goroutine, in log order. They read nothing but the request and the
// replicated state (the password hash comes in the request), write their
// records through w in the batch of the entry, and publish the new state
// at once. Each follows etcd 3.6's authStore method of the same name,
// including which changes move the auth revision.

// commit bumps the revision of next, persists it, and publishes next.
func (s *Store) commit(w AuxWriter, next *state) {
	next.rev++
	w.PutAux(bucket, keyRevision, encodeRevision(next.rev))
	s.cur.Store(next.seal())
}

func (s *Store) putUser(w AuxWriter, st *state, u *authpb.User) {
	st.users[string(u.Name)] = u
	w.PutAux(bucket, userKey(string(u.Name)), mustMarshal(u))
}

func (s *Store) putRole(w AuxWriter, st *state, r *authpb.Role) {
	st.roles[string(r.Name)] = r
	w.PutAux(bucket, roleKey(string(r.Name)), mustMarshal(r))
}

// ApplyAuthEnable turns authentication on; it needs a root user with the
// root role. Enabling does not move the revision (as etcd).
func (s *Store) ApplyAuthEnable(w AuxWriter) error {
	cur := s.load()
	if cur.enabled {
		s.log.Info("authentication is already enabled; ignored auth enable request")
		return nil
	}
	u := cur.users[rootUser]
	if u == nil {
		return ErrRootUserNotExist
	}
	if !hasRootRole(u) {
		return ErrRootRoleNotExist
	}
	next := cur.clone()
	next.enabled = true
	w.PutAux(bucket, keyEnabled, encodeEnabled(true))
	// etcd writes the revision it already has; persisting it here keeps
	// the implicit initial revision 1 across a restart.
	w.PutAux(bucket, keyRevision, encodeRevision(next.rev))
	s.cur.Store(next.seal())
	s.tokens.enable()
	s.log.Info("enabled authentication")
	return nil
}

// ApplyAuthDisable turns authentication off and drops every token.
func (s *Store) ApplyAuthDisable(w AuxWriter) {
	cur := s.load()
	if !cur.enabled {
		return
	}
	next := cur.clone()
	next.enabled = false
	w.PutAux(bucket, keyEnabled, encodeEnabled(false))
	s.commit(w, next)
	s.tokens.disable()
	s.log.Info("disabled authentication")
}

// AuthStatus is whether authentication is on, and the auth revision.
func (s *Store) AuthStatus() (bool, uint64) {
	st := s.load()
	return st.enabled, st.rev
}

// ApplyAuthenticate issues a token to a user whose password the proposer
// checked: a simple token prefix.index registered on this member, or a
// signed JWT.
func (s *Store) ApplyAuthenticate(name, simpleTokenPrefix string, index uint64) (string, error) {
	st := s.load()
	if !st.enabled {
		return "", ErrAuthNotEnabled
	}
	u := st.users[name]
	if u == nil {
		return "", ErrAuthFailed
	}
	if u.Options != nil && u.Options.NoPassword {
		return "", ErrAuthFailed
	}
	token, err := s.tokens.assign(context.Background(), name, st.rev, simpleTokenPrefix, index)
	if err != nil {
		return "", err
	}
	s.log.Debug("authenticated a user", "user-name", name, "token-fingerprint", redactToken(token))
	return token, nil
}

// passwordOf is the stored hash for a request's password fields: the
// proposer's hash (hashed_password, base64). A request carrying the
// password itself is refused: MetaStore's proposers never make one, and
// hashing here (bcrypt salts at random) would make members diverge.
func (s *Store) passwordOf(password, hashed string) ([]byte, error) {
	if password != "" && hashed == "" {
		return nil, ErrNoPasswordUser
	}
	return base64.StdEncoding.DecodeString(hashed)
}

// ApplyUserAdd adds a user.
func (s *Store) ApplyUserAdd(w AuxWriter, r *pb.AuthUserAddRequest) error {
	if len(r.Name) == 0 {
		return ErrUserEmpty
	}
	cur := s.load()
	if cur.users[r.Name] != nil {
		return ErrUserAlreadyExist
	}
	opts := r.Options
	if opts == nil {
		opts = &authpb.UserAddOptions{NoPassword: false}
	}
	var password []byte
	if !opts.NoPassword {
		var err error
		if password, err = s.passwordOf(r.Password, r.HashedPassword); err != nil {
			return ErrNoPasswordUser
		}
	}
	next := cur.clone()
	s.putUser(w, next, &authpb.User{Name: []byte(r.Name), Password: password, Options: opts})
	s.commit(w, next)
	s.log.Info("added a user", "user-name", r.Name)
	return nil
}

// ApplyUserDelete deletes a user (never root while auth is on) and its
// tokens.
func (s *Store) ApplyUserDelete(w AuxWriter, r *pb.AuthUserDeleteRequest) error {
	cur := s.load()
	if cur.enabled && r.Name == rootUser {
		s.log.Error("cannot delete 'root' user", "user-name", r.Name)
		return ErrInvalidAuthMgmt
	}
	u := cur.users[r.Name]
	if u == nil {
		return ErrUserNotFound
	}
	next := cur.clone()
	delete(next.users, r.Name)
	w.DeleteAux(bucket, userKey(r.Name))
	s.commit(w, next)
	s.tokens.invalidateUser(r.Name)
	s.log.Info("deleted a user", "user-name", r.Name, "user-roles", u.Roles)
	return nil
}

// ApplyUserChangePassword replaces a user's password hash and drops its
// tokens.
func (s *Store) ApplyUserChangePassword(w AuxWriter, r *pb.AuthUserChangePasswordRequest) error {
	cur := s.load()
	u := cur.users[r.Name]
	if u == nil {
		return ErrUserNotFound
	}
	var password []byte
	if u.Options == nil || !u.Options.NoPassword {
		var err error
		if password, err = s.passwordOf(r.Password, r.HashedPassword); err != nil {
			return ErrNoPasswordUser
		}
	}
	next := cur.clone()
	s.putUser(w, next, &authpb.User{Name: []byte(r.Name), Roles: u.Roles, Password: password, Options: u.Options})
	s.commit(w, next)
	s.tokens.invalidateUser(r.Name)
	s.log.Info("changed a password of a user", "user-name", r.Name, "user-roles", u.Roles)
	return nil
}

// ApplyUserGrantRole grants a role (which must exist, except root) to a
// user; granting a role the user has changes nothing.
func (s *Store) ApplyUserGrantRole(w AuxWriter, r *pb.AuthUserGrantRoleRequest) error {
	cur := s.load()
	u := cur.users[r.User]
	if u == nil {
		return ErrUserNotFound
	}
	if r.Role != rootRole && cur.roles[r.Role] == nil {
		return ErrRoleNotFound
	}
	i := sort.SearchStrings(u.Roles, r.Role)
	if i < len(u.Roles) && u.Roles[i] == r.Role {
		s.log.Warn("ignored grant role request to a user", "user-name", r.User,
			"user-roles", u.Roles, "duplicate-role-name", r.Role)
		return nil
	}
	roles := append(slices.Clone(u.Roles), r.Role)
	sort.Strings(roles)
	next := cur.clone()
	s.putUser(w, next, &authpb.User{Name: u.Name, Password: u.Password, Options: u.Options, Roles: roles})
	s.commit(w, next)
	s.log.Info("granted a role to a user", "user-name", r.User, "user-roles", roles, "added-role-name", r.Role)
	return nil
}

// UserGet lists a user's roles.
func (s *Store) UserGet(name string) ([]string, error) {
	u := s.load().users[name]
	if u == nil {
		return nil, ErrUserNotFound
	}
	return slices.Clone(u.Roles), nil
}

// UserList lists the users by name.
func (s *Store) UserList() []string { return s.load().userNames() }

// ApplyUserRevokeRole revokes a role from a user (never root's root role
// while auth is on).
func (s *Store) ApplyUserRevokeRole(w AuxWriter, r *pb.AuthUserRevokeRoleRequest) error {
	cur := s.load()
	if cur.enabled && r.Name == rootUser && r.Role == rootRole {
		s.log.Error("'root' user cannot revoke 'root' role", "user-name", r.Name, "role-name", r.Role)
		return ErrInvalidAuthMgmt
	}
	u := cur.users[r.Name]
	if u == nil {
		return ErrUserNotFound
	}
	updated := &authpb.User{Name: u.Name, Password: u.Password, Options: u.Options}
	for _, role := range u.Roles {
		if role != r.Role {
			updated.Roles = append(updated.Roles, role)
		}
	}
	if len(updated.Roles) == len(u.Roles) {
		return ErrRoleNotGranted
	}
	next := cur.clone()
	s.putUser(w, next, updated)
	s.commit(w, next)
	s.log.Info("revoked a role from a user", "user-name", r.Name, "old-user-roles", u.Roles,
		"new-user-roles", updated.Roles, "revoked-role-name", r.Role)
	return nil
}

// RoleGet lists a role's permissions (the root role: the whole key space).
func (s *Store) RoleGet(name string) ([]*authpb.Permission, error) {
	role := s.load().roles[name]
	if role == nil {
		return nil, ErrRoleNotFound
	}
	if string(role.Name) == rootRole {
		p := rootPerm
		return []*authpb.Permission{&p}, nil
	}
	return slices.Clone(role.KeyPermission), nil
}

// RoleList lists the roles by name.
func (s *Store) RoleList() []string { return s.load().roleNames() }

// ApplyRoleRevokePermission removes the permission on exactly
// [key, range_end) from a role.
func (s *Store) ApplyRoleRevokePermission(w AuxWriter, r *pb.AuthRoleRevokePermissionRequest) error {
	cur := s.load()
	role := cur.roles[r.Role]
	if role == nil {
		return ErrRoleNotFound
	}
	perms := withoutPerm(role.KeyPermission, r.Key, r.RangeEnd)
	if len(perms) == len(role.KeyPermission) {
		return ErrPermissionNotGranted
	}
	next := cur.clone()
	s.putRole(w, next, &authpb.Role{Name: role.Name, KeyPermission: perms})
	s.commit(w, next)
	s.log.Info("revoked a permission on range", "role-name", r.Role, "key", string(r.Key), "range-end", string(r.RangeEnd))
	return nil
}

// ApplyRoleDelete deletes a role (never root while auth is on) and
// revokes it from every user.
func (s *Store) ApplyRoleDelete(w AuxWriter, r *pb.AuthRoleDeleteRequest) error {
	cur := s.load()
	if cur.enabled && r.Role == rootRole {
		s.log.Error("cannot delete 'root' role", "role-name", r.Role)
		return ErrInvalidAuthMgmt
	}
	if cur.roles[r.Role] == nil {
		return ErrRoleNotFound
	}
	next := cur.clone()
	delete(next.roles, r.Role)
	w.DeleteAux(bucket, roleKey(r.Role))
	for _, name := range cur.userNames() {
		u := cur.users[name]
		if !hasRole(u, r.Role) {
			continue
		}
		updated := &authpb.User{Name: u.Name, Password: u.Password, Options: u.Options}
		for _, role := range u.Roles {
			if role != r.Role {
				updated.Roles = append(updated.Roles, role)
			}
		}
		s.putUser(w, next, updated)
	}
	s.commit(w, next)
	s.log.Info("deleted a role", "role-name", r.Role)
	return nil
}

// ApplyRoleAdd adds a role without permissions.
func (s *Store) ApplyRoleAdd(w AuxWriter, r *pb.AuthRoleAddRequest) error {
	if len(r.Name) == 0 {
		return ErrRoleEmpty
	}
	cur := s.load()
	if cur.roles[r.Name] != nil {
		return ErrRoleAlreadyExist
	}
	next := cur.clone()
	s.putRole(w, next, &authpb.Role{Name: []byte(r.Name)})
	s.commit(w, next)
	s.log.Info("created a role", "role-name", r.Name)
	return nil
}

// ApplyRoleGrantPermission grants a permission to a role, or changes the
// type of the one on the same range. Permissions stay sorted by key.
func (s *Store) ApplyRoleGrantPermission(w AuxWriter, r *pb.AuthRoleGrantPermissionRequest) error {
	if r.Perm == nil {
		return ErrPermissionNotGiven
	}
	if !isValidPermissionRange(r.Perm.Key, r.Perm.RangeEnd) {
		return ErrInvalidAuthMgmt
	}
	cur := s.load()
	role := cur.roles[r.Name]
	if role == nil {
		return ErrRoleNotFound
	}
	perms := make([]*authpb.Permission, len(role.KeyPermission))
	copy(perms, role.KeyPermission)
	i := sort.Search(len(perms), func(i int) bool { return bytes.Compare(perms[i].Key, r.Perm.Key) >= 0 })
	if i < len(perms) && bytes.Equal(perms[i].Key, r.Perm.Key) && bytes.Equal(perms[i].RangeEnd, r.Perm.RangeEnd) {
		p := *perms[i]
		p.PermType = r.Perm.PermType
		perms[i] = &p
	} else {
		perms = append(perms, &authpb.Permission{Key: r.Perm.Key, RangeEnd: r.Perm.RangeEnd, PermType: r.Perm.PermType})
		sort.Sort(byKey(perms))
	}
	next := cur.clone()
	s.putRole(w, next, &authpb.Role{Name: role.Name, KeyPermission: perms})
	s.commit(w, next)
	s.log.Info("granted/updated a permission to a user", "user-name", r.Name,
		"permission-name", authpb.Permission_Type_name[int32(r.Perm.PermType)],
		"key", string(r.Perm.Key), "range-end", string(r.Perm.RangeEnd))
	return nil
}

// byKey sorts permissions by key as etcd's permSlice does (sort.Sort, not
// stable: the order of equal keys is sort.Sort's, the same everywhere).
type byKey []*authpb.Permission

func (p byKey) Len() int           { return len(p) }
func (p byKey) Less(i, j int) bool { return bytes.Compare(p[i].Key, p[j].Key) < 0 }
func (p byKey) Swap(i, j int)      { p[i], p[j] = p[j], p[i] }
