package auth

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	simpleTokenLetters    = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	simpleTokenPrefixLen  = 16
	defaultSimpleTokenTTL = 300 * time.Second
	// simpleTokenSweep is how often expired simple tokens are dropped.
	simpleTokenSweep = time.Second
)

// simpleTokens are etcd's simple tokens: "<16 random letters>.<raft
// index>". The proposer of an Authenticate picks the letters; every
// member registers the token when the entry applies, so a token issued
// through one member is accepted by all of them (each after applying the
// entry). A token lives TTL after its last use on a member; tokens are not
// persisted, so a restarted member forgets them.
//
// Lookups take no lock (sync.Map; the deadline is atomic); mu orders
// enable/disable against registration.
type simpleTokens struct {
	log         *slog.Logger
	waitApplied func(context.Context, uint64) error
	ttl         time.Duration

	mu      sync.Mutex // guards enabled transitions and stop
	enabled atomic.Bool
	tokens  sync.Map // token -> *simpleToken
	stop    chan struct{}
	stopped chan struct{}
}

type simpleToken struct {
	user     string
	deadline atomic.Int64 // unix nanoseconds
}

func newSimpleTokens(log *slog.Logger, waitApplied func(context.Context, uint64) error, ttl time.Duration) *simpleTokens {
	if ttl <= 0 {
		ttl = defaultSimpleTokenTTL
	}
	return &simpleTokens{log: log, waitApplied: waitApplied, ttl: ttl}
}

func (t *simpleTokens) genTokenPrefix() (string, error) {
	b := make([]byte, simpleTokenPrefixLen)
	n := big.NewInt(int64(len(simpleTokenLetters)))
	for i := range b {
		v, err := rand.Int(rand.Reader, n)
		if err != nil {
			return "", fmt.Errorf("auth: token prefix: %w", err)
		}
		b[i] = simpleTokenLetters[v.Int64()]
	}
	return string(b), nil
}

func (t *simpleTokens) assign(_ context.Context, username string, _ uint64, prefix string, index uint64) (string, error) {
	token := fmt.Sprintf("%s.%d", prefix, index)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.enabled.Load() {
		return token, nil
	}
	e := &simpleToken{user: username}
	e.deadline.Store(time.Now().Add(t.ttl).UnixNano())
	t.tokens.Store(token, e)
	return token, nil
}

// ParseSimpleToken splits a simple token into its prefix and raft index.
func ParseSimpleToken(token string) (prefix string, index uint64, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 2 {
		return "", 0, false
	}
	index, err := strconv.ParseUint(parts[1], 10, 0)
	if err != nil {
		return "", 0, false
	}
	return parts[0], index, true
}

func (t *simpleTokens) info(ctx context.Context, token string, rev uint64) (*AuthInfo, bool) {
	_, index, ok := ParseSimpleToken(token)
	if !ok {
		return nil, false
	}
	if t.waitApplied != nil {
		if err := t.waitApplied(ctx, index); err != nil {
			return nil, false
		}
	}
	v, ok := t.tokens.Load(token)
	if !ok {
		return nil, false
	}
	e := v.(*simpleToken)
	now := time.Now()
	if now.UnixNano() > e.deadline.Load() {
		return nil, false
	}
	e.deadline.Store(now.Add(t.ttl).UnixNano())
	return &AuthInfo{Username: e.user, Revision: rev}, true
}

func (t *simpleTokens) invalidateUser(username string) {
	t.tokens.Range(func(k, v any) bool {
		if v.(*simpleToken).user == username {
			t.tokens.Delete(k)
		}
		return true
	})
}

func (t *simpleTokens) enable() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.enabled.Load() {
		return
	}
	t.enabled.Store(true)
	t.stop, t.stopped = make(chan struct{}), make(chan struct{})
	go t.sweep(t.stop, t.stopped)
}

func (t *simpleTokens) disable() {
	t.mu.Lock()
	if !t.enabled.Load() {
		t.mu.Unlock()
		return
	}
	t.enabled.Store(false)
	stop, stopped := t.stop, t.stopped
	t.tokens.Clear()
	t.mu.Unlock()
	close(stop)
	<-stopped
}

// sweep drops expired tokens so that the map does not grow without bound.
func (t *simpleTokens) sweep(stop, stopped chan struct{}) {
	defer close(stopped)
	tick := time.NewTicker(simpleTokenSweep)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			t.tokens.Range(func(k, v any) bool {
				if now.UnixNano() > v.(*simpleToken).deadline.Load() {
					t.tokens.Delete(k)
					t.log.Debug("deleted a simple token", "user-name", v.(*simpleToken).user)
				}
				return true
			})
		}
	}
}
