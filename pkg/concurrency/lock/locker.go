package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/concurrency/internal/renewal"
	"github.com/metastore-io/metastore/pkg/concurrency/queue"
)

// The errors of this package.
var (
	// ErrLocked is returned by TryLock when another owner holds the lock.
	ErrLocked = errors.New("lock: held by another owner")
	// ErrLockNotHeld is returned when a released lock is used.
	ErrLockNotHeld = errors.New("lock: not held")
	// ErrOwnershipLost is returned when the lock expired or was taken over
	// while the handle still thought it held it.
	ErrOwnershipLost = errors.New("lock: ownership lost")
	// ErrLockAlreadyHeld is returned by Lock and TryLock for a name the
	// same Locker already holds.
	ErrLockAlreadyHeld = errors.New("lock: already held by this process")
)

// errKeyLostWhileWaiting means the contender's lease expired while it was
// queued; Lock retries with a new lease.
var errKeyLostWhileWaiting = errors.New("lock: lease expired while waiting")

const (
	// DefaultTTL is a lock's lease TTL unless Config.TTL or WithTTL says
	// otherwise.
	DefaultTTL = 10 * time.Second
	// DefaultRetryInterval spaces Lock's attempts after transient errors.
	DefaultRetryInterval = 200 * time.Millisecond
	// DefaultRequestTimeout bounds each request a lock makes on its
	// caller's behalf unless Config.RequestTimeout or WithRequestTimeout
	// says otherwise. It is etcd's default request timeout: a call
	// through a member that cannot answer (frozen, cut off from its
	// peers) fails within it instead of waiting for gRPC's keepalive or
	// the caller's context.
	DefaultRequestTimeout = 7 * time.Second
	// cleanupTimeout bounds the background read of a held key when its
	// watch ended without an answer.
	cleanupTimeout = 5 * time.Second
)

// Config configures a Locker.
type Config struct {
	// Client is the connection to MetaStore (or etcd). Required.
	Client *clientv3.Client
	// Prefix is prepended to every lock name.
	Prefix string
	// TTL is the default lease TTL of a lock; 0 means DefaultTTL. The
	// server rounds it up to whole seconds and to its minimum TTL.
	TTL time.Duration
	// RetryInterval is the default pause between attempts after a
	// transient error; 0 means DefaultRetryInterval.
	RetryInterval time.Duration
	// LockDelay is the default lock delay D (see WithLockDelay); 0 means
	// one second, capped at a quarter of the lock's TTL.
	LockDelay time.Duration
	// RequestTimeout is the default request timeout (see
	// WithRequestTimeout); 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Logger receives retries and losses; nil discards them.
	Logger *slog.Logger
}

// Locker acquires locks. It remembers which names it holds, so share one
// Locker per process.
type Locker struct {
	client        *clientv3.Client
	prefix        string
	ttl           time.Duration
	retryInterval time.Duration
	lockDelay     time.Duration
	reqTimeout    time.Duration
	log           *slog.Logger

	mu   sync.Mutex
	held map[string]*Lock // by name
}

// NewLocker returns a Locker for cfg.
func NewLocker(cfg Config) (*Locker, error) {
	if cfg.Client == nil {
		return nil, errors.New("lock: Config.Client is required")
	}
	if cfg.TTL < 0 || cfg.RetryInterval < 0 || cfg.LockDelay < 0 || cfg.RequestTimeout < 0 {
		return nil, fmt.Errorf("lock: negative TTL %v, retry interval %v, lock delay %v or request timeout %v",
			cfg.TTL, cfg.RetryInterval, cfg.LockDelay, cfg.RequestTimeout)
	}
	l := &Locker{
		client:        cfg.Client,
		prefix:        cfg.Prefix,
		ttl:           cmpOr(cfg.TTL, DefaultTTL),
		retryInterval: cmpOr(cfg.RetryInterval, DefaultRetryInterval),
		lockDelay:     cfg.LockDelay,
		reqTimeout:    cmpOr(cfg.RequestTimeout, DefaultRequestTimeout),
		log:           cfg.Logger,
		held:          make(map[string]*Lock),
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l, nil
}

func cmpOr(d, fallback time.Duration) time.Duration {
	if d == 0 {
		return fallback
	}
	return d
}

// Option adjusts one Lock or TryLock call.
type Option func(*options)

type options struct {
	ttl           time.Duration
	retryInterval time.Duration
	manualRenewal bool
	owner         string
	lockDelay     time.Duration // 0: the default for the granted TTL
	reqTimeout    time.Duration
}

// WithTTL sets this lock's lease TTL (rounded up to whole seconds).
func WithTTL(ttl time.Duration) Option { return func(o *options) { o.ttl = ttl } }

// WithRetryInterval sets the pause between attempts after transient errors.
func WithRetryInterval(d time.Duration) Option { return func(o *options) { o.retryInterval = d } }

// WithLockDelay sets the lock delay D: the holder's deadline is D before
// the last moment its own renewals keep the lease alive, so it has D to
// stop working under the lock before anybody else can be granted it after
// a failure. It may be at most half the TTL. A clean Unlock frees the
// lock at once whatever D is.
func WithLockDelay(d time.Duration) Option { return func(o *options) { o.lockDelay = d } }

// WithRequestTimeout bounds each request the lock makes on the caller's
// behalf (Lock's and TryLock's, and those of the handle they return:
// Unlock, Renew, TTL, Guard.Do), and Lock's time without a place in the
// queue, to d. A member that cannot answer makes the call fail within d
// instead of leaving the caller waiting for gRPC's keepalive or its own
// context. The default is Config.RequestTimeout, else
// DefaultRequestTimeout.
func WithRequestTimeout(d time.Duration) Option { return func(o *options) { o.reqTimeout = d } }

// WithManualRenewal stops background renewal once the lock is held: the
// holder must call Renew at least once per TTL or lose the lock.
func WithManualRenewal() Option { return func(o *options) { o.manualRenewal = true } }

// WithOwner stores owner (a host name, a pod, a job ID) as the value of the
// lock's key, for operators to see.
func WithOwner(owner string) Option { return func(o *options) { o.owner = owner } }

// Lock acquires the lock called name, waiting in FIFO order behind earlier
// contenders until ctx ends. ctx bounds only the acquisition; the lock is
// held until Unlock or until it is lost.
//
// Waiting in the queue is bounded only by ctx: a contender whose key is
// in line may wait behind a holder as long as it holds. Everything else
// is bounded by the request timeout (WithRequestTimeout): each request,
// and each stretch without a place in the queue, from the call's start
// or from the moment a waiter lost its place (its own lease's deadline
// passed, its watch was lost). Transient errors are retried every retry
// interval within that stretch; when the stretch reaches the request
// timeout, Lock fails with an error wrapping context.DeadlineExceeded
// (and the last attempt's error) rather than go on retrying silently
// through a member that cannot answer. The caller decides whether to
// call again, perhaps through another member.
func (l *Locker) Lock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, name, true, opts)
}

// TryLock acquires the lock called name if nobody holds it, and returns
// ErrLocked otherwise, without waiting.
func (l *Locker) TryLock(ctx context.Context, name string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, name, false, opts)
}

func (l *Locker) acquire(ctx context.Context, name string, wait bool, opts []Option) (*Lock, error) {
	if name == "" || strings.Contains(name, "\x00") {
		return nil, fmt.Errorf("lock: invalid name %q", name)
	}
	o := options{ttl: l.ttl, retryInterval: l.retryInterval, lockDelay: l.lockDelay, reqTimeout: l.reqTimeout}
	for _, apply := range opts {
		apply(&o)
	}
	if o.ttl <= 0 || o.retryInterval <= 0 || o.reqTimeout <= 0 {
		return nil, fmt.Errorf("lock %q: TTL %v, retry interval %v and request timeout %v must be positive",
			name, o.ttl, o.retryInterval, o.reqTimeout)
	}
	if o.lockDelay != 0 {
		if err := renewal.CheckLockDelay(o.ttl, o.lockDelay); err != nil {
			return nil, fmt.Errorf("lock %q: %w", name, err)
		}
	}
	if l.holding(name) {
		return nil, fmt.Errorf("lock %q: %w", name, ErrLockAlreadyHeld)
	}
	unplaced := time.Now() // since when the contender has had no place in the queue
	for {
		h, lostAt, err := l.attempt(ctx, name, wait, unplaced.Add(o.reqTimeout), o)
		if err == nil {
			l.register(h)
			return h, nil
		}
		if !lostAt.IsZero() {
			unplaced = lostAt
		}
		if errors.Is(err, ErrLocked) || ctx.Err() != nil {
			return nil, fmt.Errorf("lock %q: %w", name, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("lock %q: no answer within the request timeout (%v): %w", name, o.reqTimeout, err)
		}
		if !retryable(err) {
			return nil, fmt.Errorf("lock %q: %w", name, err)
		}
		if !time.Now().Add(o.retryInterval).Before(unplaced.Add(o.reqTimeout)) {
			return nil, fmt.Errorf("lock %q: no place in the queue within the request timeout (%v): %w (last attempt: %w)",
				name, o.reqTimeout, context.DeadlineExceeded, err)
		}
		l.log.Warn("lock attempt failed, retrying", "lock", name, "retry-in", o.retryInterval, "error", err)
		retry := time.NewTimer(o.retryInterval)
		select {
		case <-retry.C:
		case <-ctx.Done():
			retry.Stop()
			return nil, fmt.Errorf("lock %q: %w (last attempt: %w)", name, ctx.Err(), err)
		}
	}
}

// attempt is one try: a fresh lease and a place in the queue, both by
// joinBy, and (if wait) the wait for everyone ahead to leave. When it
// fails after the contender had a place, lostAt is when it gave the
// place up (before the cleanup, which may itself wait on the member).
func (l *Locker) attempt(ctx context.Context, name string, wait bool, joinBy time.Time, o options) (h *Lock, lostAt time.Time, err error) {
	ttlSeconds := int64(math.Ceil(o.ttl.Seconds()))
	joinCtx, cancel := context.WithDeadline(ctx, joinBy)
	defer cancel()
	// The lease lives at least a TTL from the moment the leader grants
	// it, which is after this.
	sent := time.Now()
	grant, err := l.client.Grant(joinCtx, ttlSeconds)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("grant lease: %w", err)
	}
	h, err = l.newLock(name, grant.ID, time.Duration(grant.TTL)*time.Second, sent, o)
	if err != nil {
		l.revoke(ctx, grant.ID, o.reqTimeout)
		return nil, time.Time{}, err
	}
	pos, err := queue.Join(joinCtx, l.client, h.queuePrefix, h.key, o.owner, grant.ID)
	if err != nil {
		h.abandon()
		return nil, time.Time{}, fmt.Errorf("join queue: %w", err)
	}
	h.token = pos.Rev
	if pos.Head {
		h.held(o.manualRenewal)
		return h, time.Time{}, nil
	}
	giveUp := func(err error) (*Lock, time.Time, error) {
		at := time.Now()
		h.abandon()
		return nil, at, err
	}
	if !wait {
		return giveUp(ErrLocked)
	}
	if err := h.await(ctx, pos.Rev); err != nil {
		return giveUp(err)
	}
	confirmCtx, cancelConfirm := context.WithTimeout(ctx, o.reqTimeout)
	defer cancelConfirm()
	own, err := l.client.Get(confirmCtx, h.key)
	if err != nil {
		return giveUp(fmt.Errorf("confirm ownership: %w", err))
	}
	if len(own.Kvs) == 0 || own.Kvs[0].CreateRevision != h.token || h.renewer.Err() != nil {
		return giveUp(errKeyLostWhileWaiting)
	}
	h.held(o.manualRenewal)
	return h, time.Time{}, nil
}

// await waits in the queue for everyone ahead of rev to leave. A
// contender whose own lease can no longer be vouched for (its renewer
// ended) stops waiting: it could only be granted a lock it must at once
// assume lost.
func (h *Lock) await(ctx context.Context, rev int64) error {
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.renewer.Done():
			cancel()
		case <-waitCtx.Done():
		}
	}()
	err := queue.Await(waitCtx, h.client, h.queuePrefix, rev)
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil && h.renewer.Err() != nil:
		return fmt.Errorf("%w: %w", errKeyLostWhileWaiting, h.renewer.Err())
	}
	return fmt.Errorf("wait for earlier holders: %w", err)
}

// revoke removes a lease (and with it the attempt's key) on a context that
// survives the caller's cancellation, bounded by timeout so a dead server
// cannot hang the caller: an unrevoked lease simply expires.
func (l *Locker) revoke(ctx context.Context, id clientv3.LeaseID, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if _, err := l.client.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		l.log.Debug("revoke lock lease failed; it will expire", "lease", fmt.Sprintf("%x", int64(id)), "error", err)
	}
}

func (l *Locker) holding(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.held[name]
	return ok
}

// register records h as held. Another handle of this Locker may still be
// recorded for the name if two goroutines queued for it and the first lost
// the lock without noticing yet; the server just gave the lock to h, so the
// older handle is told it is lost.
func (l *Locker) register(h *Lock) {
	l.mu.Lock()
	prev := l.held[h.name]
	l.held[h.name] = h
	l.mu.Unlock()
	if prev != nil && prev != h {
		prev.markLost("a newer holder in the same Locker acquired the lock")
	}
}

// forget drops h from the held set, unless the name already belongs to a
// newer handle.
func (l *Locker) forget(h *Lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[h.name] == h {
		delete(l.held, h.name)
	}
}

// retryable reports whether err is worth another attempt: the connection
// or the cluster had trouble, or the contender's lease or watch was lost.
// Context errors, ErrLocked and invalid requests are not.
func retryable(err error) bool {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, errKeyLostWhileWaiting), errors.Is(err, queue.ErrWatchLost),
		errors.Is(err, rpctypes.ErrLeaseNotFound), errors.Is(err, rpctypes.ErrCompacted),
		errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrLeaderChanged),
		errors.Is(err, rpctypes.ErrTimeout), errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost), errors.Is(err, rpctypes.ErrStopped):
		return true
	}
	// status.Code looks through wrapping.
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}
