package concurrency

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// defaultSessionTTL is the lease TTL, in seconds, of a session created
// without WithTTL (etcd's default).
const defaultSessionTTL = 60

// Session is a lease kept alive for as long as the client runs, or until
// the session is closed or orphaned. Keys written through mutexes and
// elections are attached to it, so they vanish when the holder dies.
type Session struct {
	client  *clientv3.Client
	opts    sessionOptions
	leaseID clientv3.LeaseID

	ctx    context.Context
	cancel context.CancelFunc
	done   <-chan struct{}
}

// NewSession grants a lease (or adopts the one given by WithLease) and keeps
// it alive in the background until the session's context ends or the lease
// can no longer be renewed.
func NewSession(client *clientv3.Client, opts ...SessionOption) (*Session, error) {
	o := sessionOptions{ttl: defaultSessionTTL, ctx: client.Ctx()}
	for _, apply := range opts {
		apply(&o)
	}

	leaseID := o.leaseID
	if leaseID == clientv3.NoLease {
		grant, err := client.Grant(o.ctx, int64(o.ttl))
		if err != nil {
			return nil, err
		}
		leaseID = grant.ID
	}

	ctx, cancel := context.WithCancel(o.ctx)
	keepAlive, err := client.KeepAlive(ctx, leaseID)
	if err != nil || keepAlive == nil {
		cancel()
		return nil, err
	}

	done := make(chan struct{})
	s := &Session{client: client, opts: o, leaseID: leaseID, ctx: ctx, cancel: cancel, done: done}
	go func() {
		// The client closes keepAlive when the lease expires or is revoked,
		// when renewals stop arriving for a whole TTL, or when ctx ends.
		// Whatever the cause, the session is over: cancel its context too.
		defer cancel()
		defer close(done)
		for range keepAlive {
		}
	}()
	return s, nil
}

// Client is the client the session was created with.
func (s *Session) Client() *clientv3.Client { return s.client }

// Lease is the ID of the session's lease.
func (s *Session) Lease() clientv3.LeaseID { return s.leaseID }

// Ctx is cancelled when the session ends: orphaned, closed, expired, or no
// longer renewed.
func (s *Session) Ctx() context.Context { return s.ctx }

// Done is closed when the session ends: orphaned, closed, expired, or no
// longer renewed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Orphan stops renewing the lease without revoking it, leaving it to expire
// on its own (or to be adopted by another session through WithLease). It
// is the way out when the connection is in doubt and a revoke could hang.
func (s *Session) Orphan() {
	s.cancel()
	<-s.done
}

// Close stops renewing and revokes the lease, which deletes every key
// attached to it. A revoke that takes longer than the TTL is abandoned: the
// lease has expired by then anyway.
func (s *Session) Close() error {
	s.Orphan()
	ctx, cancel := context.WithTimeout(s.opts.ctx, time.Duration(s.opts.ttl)*time.Second)
	defer cancel()
	_, err := s.client.Revoke(ctx, s.leaseID)
	return err
}

type sessionOptions struct {
	ttl     int
	leaseID clientv3.LeaseID
	ctx     context.Context
}

// SessionOption configures NewSession.
type SessionOption func(*sessionOptions)

// WithTTL sets the lease TTL in seconds. A TTL <= 0 is ignored and the
// default (60 s) is kept.
func WithTTL(ttl int) SessionOption {
	return func(o *sessionOptions) {
		if ttl > 0 {
			o.ttl = ttl
		}
	}
}

// WithLease makes the session adopt an existing lease instead of granting a
// new one, for instance to take back the keys (and so the lock or the
// leadership) a previous run of the process held.
func WithLease(leaseID clientv3.LeaseID) SessionOption {
	return func(o *sessionOptions) { o.leaseID = leaseID }
}

// WithContext sets the context that bounds NewSession and Close and parents
// the session's own context, instead of the client's. Cancelling it ends
// the session; if that happens before Close revokes the lease, the lease is
// left to expire.
func WithContext(ctx context.Context) SessionOption {
	return func(o *sessionOptions) { o.ctx = ctx }
}
