package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

// writeKeyPair writes a PEM private and public key of kind to dir.
func writeKeyPair(t *testing.T, dir, kind string) (priv, pub string) {
	t.Helper()
	var key any
	var err error
	switch kind {
	case "rsa":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ec":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ed":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	}
	mustOK(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	mustOK(t, err)
	var pubKey any
	switch k := key.(type) {
	case *rsa.PrivateKey:
		pubKey = &k.PublicKey
		der = x509.MarshalPKCS1PrivateKey(k)
	case *ecdsa.PrivateKey:
		pubKey = &k.PublicKey
		der, err = x509.MarshalECPrivateKey(k)
		mustOK(t, err)
	case ed25519.PrivateKey:
		pubKey = k.Public()
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pubKey)
	mustOK(t, err)
	priv, pub = filepath.Join(dir, kind+".key"), filepath.Join(dir, kind+".pub")
	privType := map[string]string{"rsa": "RSA PRIVATE KEY", "ec": "EC PRIVATE KEY", "ed": "PRIVATE KEY"}[kind]
	mustOK(t, os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: privType, Bytes: der}), 0o600))
	mustOK(t, os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600))
	return priv, pub
}

func TestJWTAcceptedByAnyMemberWithTheKey(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ kind, method string }{{"rsa", "RS256"}, {"rsa", "PS384"}, {"ec", "ES256"}, {"ed", "EdDSA"}} {
		t.Run(c.method, func(t *testing.T) {
			priv, pub := writeKeyPair(t, dir, c.kind)
			opt := "jwt,pub-key=" + pub + ",priv-key=" + priv + ",sign-method=" + c.method + ",ttl=1h"
			a1, a2 := newMemAux(), newMemAux()
			issuer := newTestStore(t, a1, Options{Token: opt})
			other := newTestStore(t, a2, Options{Token: "jwt,pub-key=" + pub + ",sign-method=" + c.method})
			enableWithRoot(t, issuer, a1)
			enableWithRoot(t, other, a2)
			tok, err := issuer.ApplyAuthenticate("root", "", 1)
			mustOK(t, err)
			ai, err := other.AuthInfoFromCtx(tokenCtx(tok))
			if err != nil || ai.Username != "root" || ai.Revision != issuer.Revision() {
				t.Fatalf("verify-only member: %+v %v", ai, err)
			}
			if _, err := other.ApplyAuthenticate("root", "", 2); err != ErrVerifyOnly {
				t.Fatalf("verify-only member issued a token: %v", err)
			}
			if _, err := other.AuthInfoFromCtx(tokenCtx(tok + "x")); err != ErrInvalidAuthToken {
				t.Fatalf("tampered token: %v", err)
			}
		})
	}
}

func TestJWTExpiresAndOptionErrors(t *testing.T) {
	dir := t.TempDir()
	priv, pub := writeKeyPair(t, dir, "rsa")
	aux := newMemAux()
	s := newTestStore(t, aux, Options{Token: "jwt,pub-key=" + pub + ",priv-key=" + priv + ",sign-method=RS256,ttl=-1s"})
	enableWithRoot(t, s, aux)
	tok, err := s.ApplyAuthenticate("root", "", 1)
	mustOK(t, err)
	if _, err := s.AuthInfoFromCtx(tokenCtx(tok)); err != ErrInvalidAuthToken {
		t.Fatalf("expired token: %v", err)
	}
	_, ecPub := writeKeyPair(t, dir, "ec")
	for opt, want := range map[string]error{
		"jwt,sign-method=RS256":                  ErrMissingKey,
		"jwt,pub-key=" + pub + ",sign-method=XX": ErrInvalidAuthOpts,
		"jwt,pub-key":                            ErrInvalidAuthOpts,
		"jwt,ttl=1s,ttl=2s":                      ErrInvalidAuthOpts,
		"nope":                                   ErrInvalidAuthOpts,
		"jwt,sign-method=HS256":                  ErrMissingKey,
		"jwt,pub-key=" + ecPub + ",priv-key=" + priv + ",sign-method=RS256": nil, // parse error
	} {
		_, err := New(newMemAux(), Options{Token: opt})
		if want != nil && err != want {
			t.Errorf("%s: got %v, want %v", opt, err, want)
		}
		if want == nil && err == nil {
			t.Errorf("%s: accepted", opt)
		}
	}
	_, otherPub := writeKeyPair(t, t.TempDir(), "rsa")
	if _, err := New(newMemAux(), Options{Token: "jwt,pub-key=" + otherPub + ",priv-key=" + priv + ",sign-method=RS256"}); err != ErrKeyMismatch {
		t.Fatalf("mismatched keys: %v", err)
	}
	// HMAC: the private key file is the shared secret.
	secret := filepath.Join(dir, "secret")
	mustOK(t, os.WriteFile(secret, []byte("shared-secret"), 0o600))
	a := newMemAux()
	h := newTestStore(t, a, Options{Token: "jwt,priv-key=" + secret + ",sign-method=HS256"})
	enableWithRoot(t, h, a)
	tok, err = h.ApplyAuthenticate("root", "", 1)
	mustOK(t, err)
	if ai, err := h.AuthInfoFromCtx(tokenCtx(tok)); err != nil || ai.Username != "root" {
		t.Fatalf("HS256: %+v %v", ai, err)
	}
}
