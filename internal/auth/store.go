package auth

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// bucket is the store's auxiliary bucket holding the auth records.
const bucket = kvstore.BucketAuth

// Options configures a Store; cmd/metastore fills it from etcd's flags.
type Options struct {
	Logger *slog.Logger
	// BcryptCost is --bcrypt-cost; out of bcrypt's range it falls back to
	// bcrypt.DefaultCost (10) with a warning, as etcd does.
	BcryptCost int
	// Token is --auth-token: "simple" (the default when empty) or
	// "jwt,pub-key=...,priv-key=...,sign-method=...,ttl=...".
	Token string
	// TokenTTL is --auth-token-ttl, the idle lifetime of a simple token
	// (0: 300 s).
	TokenTTL time.Duration
	// ClientCertAuth is --client-cert-auth: the Common Name of a verified
	// client certificate names the user of a request without a token.
	ClientCertAuth bool
	// WaitApplied returns once the member has applied raft index i, or
	// with ctx's error. A simple token names the index of the entry that
	// issued it; a member that has not applied it yet waits (etcd's
	// indexWaiter). Nil: tokens are checked at once.
	WaitApplied func(ctx context.Context, index uint64) error
}

// AuthInfo is who a request is from: the user name and the auth revision
// its credentials were checked at (0: no credentials).
type AuthInfo struct {
	Username string
	Revision uint64
}

// Store is the replicated user/role/permission store of one member plus
// its token provider. See doc.go.
//
// Concurrency: the Apply* methods and Reload run on the apply goroutine
// only; everything else may run anywhere. cur is the published state
// (one atomic load per check, no lock).
type Store struct {
	log        *slog.Logger
	bcryptCost int
	certAuth   bool
	tokens     tokenProvider
	cur        atomic.Pointer[state]
}

// New opens the auth store on the records of r.
func New(r AuxReader, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cost := opts.BcryptCost
	if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		log.Warn("use default bcrypt cost instead of the invalid given cost",
			"min-cost", bcrypt.MinCost, "max-cost", bcrypt.MaxCost,
			"default-cost", bcrypt.DefaultCost, "given-cost", cost)
		cost = bcrypt.DefaultCost
	}
	tp, err := newTokenProvider(log, opts.Token, opts.WaitApplied, opts.TokenTTL)
	if err != nil {
		return nil, err
	}
	s := &Store{log: log, bcryptCost: cost, certAuth: opts.ClientCertAuth, tokens: tp}
	if err := s.Reload(r); err != nil {
		tp.disable()
		return nil, err
	}
	return s, nil
}

// Reload replaces the state with the records of r: on open and after a
// snapshot was restored into the store.
func (s *Store) Reload(r AuxReader) error {
	st, err := decodeRecords(r, bucket)
	if err != nil {
		return err
	}
	if st.rev == 0 {
		// etcd starts its auth revision at 1; it is written with the
		// first change.
		st.rev = 1
	}
	s.cur.Store(st.seal())
	if st.enabled {
		s.tokens.enable()
	} else {
		s.tokens.disable()
	}
	return nil
}

// Close stops the token provider's expiry loop.
func (s *Store) Close() { s.tokens.disable() }

func (s *Store) load() *state { return s.cur.Load() }

// IsAuthEnabled reports whether authentication is on.
func (s *Store) IsAuthEnabled() bool { return s.load().enabled }

// Revision is the auth revision: it moves with every change of users,
// roles or permissions and with AuthDisable.
func (s *Store) Revision() uint64 { return s.load().rev }

// BcryptCost is the cost passwords are hashed with.
func (s *Store) BcryptCost() int { return s.bcryptCost }

// HashPassword hashes a password for a UserAdd or UserChangePassword
// proposal (the proposer hashes, so the raft log never holds the
// password and apply is deterministic). The result is the request's
// hashed_password field: base64 of the bcrypt hash.
func (s *Store) HashPassword(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), s.bcryptCost)
	if err != nil {
		return "", fmt.Errorf("auth: hash password: %w", err)
	}
	return base64.StdEncoding.EncodeToString(h), nil
}

// CheckPassword checks a user's password against the stored hash and
// returns the auth revision it was checked at. The password is not kept.
func (s *Store) CheckPassword(username, password string) (uint64, error) {
	st := s.load()
	if !st.enabled {
		return 0, ErrAuthNotEnabled
	}
	u := st.users[username]
	if u == nil {
		return 0, ErrAuthFailed
	}
	if u.Options != nil && u.Options.NoPassword {
		return 0, ErrNoPasswordUser
	}
	if bcrypt.CompareHashAndPassword(u.Password, []byte(password)) != nil {
		s.log.Info("invalid password", "user-name", username)
		return 0, ErrAuthFailed
	}
	return st.rev, nil
}

// GenTokenPrefix is the random part of a simple token, chosen by the
// member that proposes an Authenticate ("" for JWT).
func (s *Store) GenTokenPrefix() (string, error) { return s.tokens.genTokenPrefix() }

// HasRole reports whether user has role.
func (s *Store) HasRole(user, role string) bool {
	u := s.load().users[user]
	return u != nil && hasRole(u, role)
}
