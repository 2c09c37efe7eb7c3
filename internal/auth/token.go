package auth

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// tokenProvider issues and checks tokens: "simple" (a random string
// registered on every member when the Authenticate entry applies) or
// "jwt" (signed; any member with the key checks it).
type tokenProvider interface {
	// info is the user a token names, at the auth revision the request
	// is checked against; false for an invalid token.
	info(ctx context.Context, token string, rev uint64) (*AuthInfo, bool)
	// assign issues a token; simplePrefix and index are the simple
	// token's parts chosen by the proposer and the raft log.
	assign(ctx context.Context, username string, rev uint64, simplePrefix string, index uint64) (string, error)
	enable()
	disable()
	invalidateUser(username string)
	genTokenPrefix() (string, error)
}

const (
	tokenTypeSimple = "simple"
	tokenTypeJWT    = "jwt"
)

// ParseTokenOptions splits --auth-token into the token type and its
// name=value options, refusing a malformed or repeated option as etcd's
// decomposeOpts does.
func ParseTokenOptions(opt string) (string, map[string]string, error) {
	parts := strings.Split(opt, ",")
	kind := parts[0]
	opts := make(map[string]string)
	for _, p := range parts[1:] {
		pair := strings.Split(p, "=")
		if len(pair) != 2 {
			return "", nil, ErrInvalidAuthOpts
		}
		if _, dup := opts[pair[0]]; dup {
			return "", nil, ErrInvalidAuthOpts
		}
		opts[pair[0]] = pair[1]
	}
	return kind, opts, nil
}

func newTokenProvider(log *slog.Logger, opt string, waitApplied func(context.Context, uint64) error, ttl time.Duration) (tokenProvider, error) {
	if opt == "" {
		opt = tokenTypeSimple
	}
	kind, opts, err := ParseTokenOptions(opt)
	if err != nil {
		log.Error("invalid token option", "option", opt)
		return nil, ErrInvalidAuthOpts
	}
	switch kind {
	case tokenTypeSimple:
		log.Warn("simple token is not cryptographically signed")
		return newSimpleTokens(log, waitApplied, ttl), nil
	case tokenTypeJWT:
		return newJWTTokens(log, opts)
	default:
		log.Warn("unknown token type", "type", kind, "error", ErrInvalidAuthOpts)
		return nil, ErrInvalidAuthOpts
	}
}
