package auth

import (
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"go.etcd.io/etcd/api/v3/authpb"
)

// FuzzDecodeRecord feeds arbitrary auth bucket records to the decoder: it
// must refuse or accept, never panic, and what it accepts must encode back
// to a record it decodes alike.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte("me"), []byte{1})
	f.Add([]byte("mr"), encodeRevision(7))
	f.Add([]byte("uroot"), mustMarshal(&authpb.User{Name: []byte("root"), Roles: []string{"root"}}))
	f.Add([]byte("rr"), mustMarshal(&authpb.Role{Name: []byte("r"), KeyPermission: []*authpb.Permission{{Key: []byte("a")}}}))
	f.Add([]byte("x"), []byte{0xff})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		st := newState()
		if err := st.decodeRecord(k, v); err != nil {
			return
		}
		st.seal()
		for name, u := range st.users {
			again := newState()
			if err := again.decodeRecord(userKey(name), mustMarshal(u)); err != nil {
				t.Fatalf("re-decode user %q: %v", name, err)
			}
		}
	})
}

// FuzzParseSimpleToken: any string is a token or not, without panicking;
// a token's prefix is what precedes its only dot.
func FuzzParseSimpleToken(f *testing.F) {
	f.Add("abcdefghijklmnop.12")
	f.Add("a.b.c")
	f.Add(".")
	f.Fuzz(func(t *testing.T, token string) {
		prefix, _, ok := ParseSimpleToken(token)
		if ok && !strings.HasPrefix(token, prefix+".") {
			t.Fatalf("prefix %q does not start %q", prefix, token)
		}
	})
}

// FuzzParseJWT: a client-supplied JWT never panics the parser and is
// never accepted without the right signature.
func FuzzParseJWT(f *testing.F) {
	key := []byte("fuzz-secret")
	good, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"username": "u", "revision": 3, "exp": 4102444800}).SignedString(key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.eyJ1c2VybmFtZSI6InUiLCJyZXZpc2lvbiI6M30.")
	f.Fuzz(func(t *testing.T, token string) {
		ai, err := ParseJWT(token, jwt.SigningMethodHS256, key)
		if err == nil && ai == nil {
			t.Fatal("accepted without an identity")
		}
		if err == nil {
			// Anything accepted must carry a valid signature by key.
			if _, err := ParseJWT(token, jwt.SigningMethodHS256, []byte("other")); err == nil {
				t.Fatalf("token %q verifies under two keys", token)
			}
		}
	})
}
