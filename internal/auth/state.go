package auth

import (
	"bytes"
	"maps"
	"sort"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/pkg/v3/adt"
)

const (
	rootUser = "root"
	rootRole = "root"
)

// rootPerm is what RoleGet shows for the root role: read and write on the
// whole key space (etcd's rootPerm).
var rootPerm = authpb.Permission{PermType: authpb.READWRITE, Key: []byte{}, RangeEnd: []byte{0}}

// state is one version of the replicated auth data, immutable once
// published: the apply goroutine builds the next version from a clone and
// publishes it with one atomic store, so readers check permissions on a
// consistent version without any lock. Records in the maps are never
// modified after publication; a change replaces the record.
type state struct {
	enabled bool
	rev     uint64
	users   map[string]*authpb.User
	roles   map[string]*authpb.Role
	// perms is every user's merged key ranges (etcd's rangePermCache),
	// rebuilt by seal for each version: a version is tied to one auth
	// revision, so the cache is invalidated exactly when the revision
	// moves.
	perms map[string]*userPerms
}

// userPerms is the union of the key ranges a user's roles grant, for
// reading and for writing.
type userPerms struct {
	read, write adt.IntervalTree
}

func newState() *state {
	return &state{users: map[string]*authpb.User{}, roles: map[string]*authpb.Role{}}
}

// clone returns a copy whose maps the caller may change.
func (st *state) clone() *state {
	return &state{
		enabled: st.enabled,
		rev:     st.rev,
		users:   maps.Clone(st.users),
		roles:   maps.Clone(st.roles),
	}
}

// seal builds the permission cache; st is immutable afterwards.
func (st *state) seal() *state {
	st.perms = make(map[string]*userPerms, len(st.users))
	for name, u := range st.users {
		st.perms[name] = st.mergedPerms(u)
	}
	return st
}

func (st *state) mergedPerms(u *authpb.User) *userPerms {
	p := &userPerms{read: adt.NewIntervalTree(), write: adt.NewIntervalTree()}
	for _, roleName := range u.Roles {
		role := st.roles[roleName]
		if role == nil {
			continue
		}
		for _, perm := range role.KeyPermission {
			ivl := permInterval(perm)
			switch perm.PermType {
			case authpb.READWRITE:
				p.read.Insert(ivl, struct{}{})
				p.write.Insert(ivl, struct{}{})
			case authpb.READ:
				p.read.Insert(ivl, struct{}{})
			case authpb.WRITE:
				p.write.Insert(ivl, struct{}{})
			}
		}
	}
	return p
}

// permInterval is the key interval a permission covers: a single key
// without range end, [key, range_end) with one, and [key, +inf) for the
// range end "\x00" (in the affine byte order an empty end is +inf).
func permInterval(perm *authpb.Permission) adt.Interval {
	if len(perm.RangeEnd) == 0 {
		return adt.NewBytesAffinePoint(perm.Key)
	}
	end := perm.RangeEnd
	if isOpenEnded(end) {
		end = nil
	}
	return adt.NewBytesAffineInterval(perm.Key, end)
}

func isOpenEnded(rangeEnd []byte) bool { return len(rangeEnd) == 1 && rangeEnd[0] == 0 }

// isValidPermissionRange accepts a non-empty key with no range end, a
// range end after the key, or the open end "\x00".
func isValidPermissionRange(key, rangeEnd []byte) bool {
	if len(key) == 0 {
		return false
	}
	if len(rangeEnd) == 0 {
		return true
	}
	if adt.BytesAffineComparable(key).Compare(adt.BytesAffineComparable(rangeEnd)) == -1 {
		return true
	}
	return isOpenEnded(rangeEnd)
}

// permits reports whether p allows permType on [key, rangeEnd) (a single
// key when rangeEnd is empty): a key must fall inside one granted range,
// a range must be covered by the union of the granted ones.
func (p *userPerms) permits(key, rangeEnd []byte, permType authpb.Permission_Type) bool {
	tree := p.read
	if permType == authpb.WRITE {
		tree = p.write
	}
	if len(rangeEnd) == 0 {
		return tree.Intersects(adt.NewBytesAffinePoint(key))
	}
	if isOpenEnded(rangeEnd) {
		rangeEnd = nil
	}
	return tree.Contains(adt.NewBytesAffineInterval(key, rangeEnd))
}

func hasRootRole(u *authpb.User) bool {
	i := sort.SearchStrings(u.Roles, rootRole)
	return i != len(u.Roles) && u.Roles[i] == rootRole
}

func hasRole(u *authpb.User, role string) bool {
	for _, r := range u.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// userNames and roleNames list the records in key order, as etcd's
// bucket scans do.
func (st *state) userNames() []string {
	names := make([]string, 0, len(st.users))
	for n := range st.users {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (st *state) roleNames() []string {
	names := make([]string, 0, len(st.roles))
	for n := range st.roles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// withoutPerm returns role's permissions without the one on exactly
// [key, rangeEnd).
func withoutPerm(perms []*authpb.Permission, key, rangeEnd []byte) []*authpb.Permission {
	var out []*authpb.Permission
	for _, p := range perms {
		if !bytes.Equal(p.Key, key) || !bytes.Equal(p.RangeEnd, rangeEnd) {
			out = append(out, p)
		}
	}
	return out
}
