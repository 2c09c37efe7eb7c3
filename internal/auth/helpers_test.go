package auth

import (
	"bytes"
	"context"
	"sort"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/crypto/bcrypt"
)

// memAux is an in-memory aux bucket store (what kvstore.Store provides),
// committing every write at once.
type memAux struct{ m map[string][]byte }

func newMemAux() *memAux { return &memAux{m: map[string][]byte{}} }

func (a *memAux) PutAux(bucket byte, key, value []byte) {
	a.m[string(append([]byte{bucket}, key...))] = bytes.Clone(value)
}

func (a *memAux) DeleteAux(bucket byte, key []byte) {
	delete(a.m, string(append([]byte{bucket}, key...)))
}

func (a *memAux) AscendAux(b byte, fn func(key, value []byte) bool) error {
	keys := make([]string, 0, len(a.m))
	for k := range a.m {
		if k[0] == b {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn([]byte(k[1:]), a.m[k]) {
			break
		}
	}
	return nil
}

// newTestStore opens a store with the cheapest bcrypt cost.
func newTestStore(t *testing.T, aux *memAux, opts Options) *Store {
	t.Helper()
	if opts.BcryptCost == 0 {
		opts.BcryptCost = bcrypt.MinCost
	}
	s, err := New(aux, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, got, want error) {
	t.Helper()
	if got != want {
		t.Fatalf("got error %v, want %v", got, want)
	}
}

// addUser adds a user with a password, hashed as a proposer does.
func addUser(t *testing.T, s *Store, w AuxWriter, name, password string) {
	t.Helper()
	h, err := s.HashPassword(password)
	mustOK(t, err)
	mustOK(t, s.ApplyUserAdd(w, &pb.AuthUserAddRequest{Name: name, HashedPassword: h}))
}

// enableWithRoot creates root (with the root role) and enables auth.
func enableWithRoot(t *testing.T, s *Store, w AuxWriter) {
	t.Helper()
	addUser(t, s, w, "root", "rootpw")
	mustOK(t, s.ApplyUserGrantRole(w, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}))
	mustOK(t, s.ApplyAuthEnable(w))
}

func grant(t *testing.T, s *Store, w AuxWriter, role string, typ authpb.Permission_Type, key, end string) {
	t.Helper()
	p := &authpb.Permission{PermType: typ, Key: []byte(key)}
	if end != "" {
		p.RangeEnd = []byte(end)
	}
	mustOK(t, s.ApplyRoleGrantPermission(w, &pb.AuthRoleGrantPermissionRequest{Name: role, Perm: p}))
}

// login authenticates like a member does: check the password, then apply.
func login(t *testing.T, s *Store, user, password string, index uint64) *AuthInfo {
	t.Helper()
	_, err := s.CheckPassword(user, password)
	mustOK(t, err)
	prefix, err := s.GenTokenPrefix()
	mustOK(t, err)
	token, err := s.ApplyAuthenticate(user, prefix, index)
	mustOK(t, err)
	ai, err := s.AuthInfoFromCtx(tokenCtx(token))
	mustOK(t, err)
	return ai
}

func tokenCtx(token string) context.Context {
	return incoming(map[string]string{"token": token})
}
