package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWT options of --auth-token=jwt,... (etcd's names).
const (
	optSignMethod = "sign-method"
	optPublicKey  = "pub-key"
	optPrivateKey = "priv-key"
	optTTL        = "ttl"
	// defaultJWTTTL is etcd's default lifetime of a JWT.
	defaultJWTTTL = 5 * time.Minute
)

// jwtTokens are signed JSON Web Tokens with the claims etcd uses
// (username, revision, exp): any member configured with the key checks
// a token another member issued. With only a public key a member checks
// tokens but cannot issue them.
type jwtTokens struct {
	log        *slog.Logger
	signMethod jwt.SigningMethod
	key        any
	ttl        time.Duration
	verifyOnly bool
}

// jwtOptions are the parsed options; the keys are PEM files' contents.
type jwtOptions struct {
	SignMethod jwt.SigningMethod
	PublicKey  []byte
	PrivateKey []byte
	TTL        time.Duration
}

func parseJWTOptions(opts map[string]string) (*jwtOptions, error) {
	o := &jwtOptions{TTL: defaultJWTTTL}
	var err error
	if ttl := opts[optTTL]; ttl != "" {
		if o.TTL, err = time.ParseDuration(ttl); err != nil {
			return nil, err
		}
	}
	if file := opts[optPublicKey]; file != "" {
		if o.PublicKey, err = os.ReadFile(file); err != nil {
			return nil, err
		}
	}
	if file := opts[optPrivateKey]; file != "" {
		if o.PrivateKey, err = os.ReadFile(file); err != nil {
			return nil, err
		}
	}
	o.SignMethod = jwt.GetSigningMethod(opts[optSignMethod])
	if o.SignMethod == nil {
		return nil, ErrInvalidAuthMethod
	}
	return o, nil
}

// key is the signing key (private, or the HMAC secret) or, with only a
// public key, the verifying key.
func (o *jwtOptions) key() (any, error) {
	switch o.SignMethod.(type) {
	case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS:
		return pairKey(o, jwt.ParseRSAPrivateKeyFromPEM, jwt.ParseRSAPublicKeyFromPEM,
			func(pub *rsa.PublicKey, priv *rsa.PrivateKey) bool { return pub.Equal(priv.Public()) })
	case *jwt.SigningMethodECDSA:
		return pairKey(o, jwt.ParseECPrivateKeyFromPEM, jwt.ParseECPublicKeyFromPEM,
			func(pub *ecdsa.PublicKey, priv *ecdsa.PrivateKey) bool { return pub.Equal(priv.Public()) })
	case *jwt.SigningMethodEd25519:
		return pairKey(o,
			func(b []byte) (ed25519.PrivateKey, error) {
				k, err := jwt.ParseEdPrivateKeyFromPEM(b)
				if err != nil {
					return nil, err
				}
				return k.(ed25519.PrivateKey), nil
			},
			func(b []byte) (ed25519.PublicKey, error) {
				k, err := jwt.ParseEdPublicKeyFromPEM(b)
				if err != nil {
					return nil, err
				}
				return k.(ed25519.PublicKey), nil
			},
			func(pub ed25519.PublicKey, priv ed25519.PrivateKey) bool { return pub.Equal(priv.Public()) })
	case *jwt.SigningMethodHMAC:
		if len(o.PrivateKey) == 0 {
			return nil, ErrMissingKey
		}
		return o.PrivateKey, nil
	default:
		return nil, fmt.Errorf("unsupported signing method: %T", o.SignMethod)
	}
}

// pairKey parses the private and public keys present and checks that they
// belong together; the private key signs, a lone public key verifies.
func pairKey[Priv, Pub any](o *jwtOptions, parsePriv func([]byte) (Priv, error),
	parsePub func([]byte) (Pub, error), match func(Pub, Priv) bool) (any, error) {
	var (
		priv            Priv
		pub             Pub
		hasPriv, hasPub bool
		err             error
	)
	if len(o.PrivateKey) > 0 {
		if priv, err = parsePriv(o.PrivateKey); err != nil {
			return nil, err
		}
		hasPriv = true
	}
	if len(o.PublicKey) > 0 {
		if pub, err = parsePub(o.PublicKey); err != nil {
			return nil, err
		}
		hasPub = true
	}
	switch {
	case !hasPriv && !hasPub:
		return nil, ErrMissingKey
	case !hasPriv:
		return pub, nil
	case hasPub && !match(pub, priv):
		return nil, ErrKeyMismatch
	}
	return priv, nil
}

func newJWTTokens(log *slog.Logger, opts map[string]string) (*jwtTokens, error) {
	o, err := parseJWTOptions(opts)
	if err != nil {
		log.Error("problem loading JWT options", "error", err)
		return nil, ErrInvalidAuthOpts
	}
	var unknown []string
	for k := range opts {
		switch k {
		case optSignMethod, optPublicKey, optPrivateKey, optTTL:
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		log.Warn("unknown JWT options", "keys", unknown)
	}
	key, err := o.key()
	if err != nil {
		return nil, err
	}
	t := &jwtTokens{log: log, signMethod: o.SignMethod, key: key, ttl: o.TTL}
	switch key.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		t.verifyOnly = true
	}
	return t, nil
}

func (t *jwtTokens) enable()                         {}
func (t *jwtTokens) disable()                        {}
func (t *jwtTokens) invalidateUser(string)           {}
func (t *jwtTokens) genTokenPrefix() (string, error) { return "", nil }

// verifyKey is the key that checks signatures.
func (t *jwtTokens) verifyKey() any {
	switch k := t.key.(type) {
	case *rsa.PrivateKey:
		return &k.PublicKey
	case *ecdsa.PrivateKey:
		return &k.PublicKey
	case ed25519.PrivateKey:
		return k.Public()
	case crypto.Signer:
		return k.Public()
	}
	return t.key
}

// ParseJWT checks a token's signature (with method, against key) and
// expiry and returns its user and auth revision claims.
func ParseJWT(token string, method jwt.SigningMethod, key any) (*AuthInfo, error) {
	parsed, err := jwt.Parse(token, func(tk *jwt.Token) (any, error) {
		if tk.Method.Alg() != method.Alg() {
			return nil, errors.New("invalid signing method")
		}
		return key, nil
	})
	if err != nil {
		return nil, err
	}
	claims, ok := parsed.Claims.(jwt.MapClaims)
	if !parsed.Valid || !ok {
		return nil, errors.New("failed to obtain claims from a JWT token")
	}
	username, ok := claims["username"].(string)
	if !ok {
		return nil, errors.New("failed to obtain user claims from jwt token")
	}
	revision, ok := claims["revision"].(float64)
	if !ok {
		return nil, errors.New("failed to obtain revision claims from jwt token")
	}
	return &AuthInfo{Username: username, Revision: uint64(revision)}, nil
}

func (t *jwtTokens) info(_ context.Context, token string, _ uint64) (*AuthInfo, bool) {
	ai, err := ParseJWT(token, t.signMethod, t.verifyKey())
	if err != nil {
		t.log.Warn("failed to parse a JWT token", "error", err)
		return nil, false
	}
	return ai, true
}

func (t *jwtTokens) assign(_ context.Context, username string, rev uint64, _ string, _ uint64) (string, error) {
	if t.verifyOnly {
		return "", ErrVerifyOnly
	}
	tk := jwt.NewWithClaims(t.signMethod, jwt.MapClaims{
		"username": username,
		"revision": rev,
		"exp":      time.Now().Add(t.ttl).Unix(),
	})
	token, err := tk.SignedString(t.key)
	if err != nil {
		t.log.Debug("failed to sign a JWT token", "user-name", username, "revision", rev, "error", err)
		return "", err
	}
	t.log.Debug("created/assigned a new JWT token", "user-name", username, "revision", rev,
		"token-fingerprint", redactToken(token))
	return token, nil
}
