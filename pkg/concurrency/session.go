package concurrency

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency/internal/renewal"
)

// defaultSessionTTL is the lease TTL, in seconds, of a session created
// without WithTTL (etcd's default).
const defaultSessionTTL = 60

// Session is a lease kept alive for as long as the client runs, or until
// the session is closed, orphaned, or can no longer be sure its lease is
// alive. Keys written through mutexes and elections are attached to it, so
// they vanish when the holder dies.
type Session struct {
	client  *clientv3.Client
	opts    sessionOptions
	leaseID clientv3.LeaseID
	renewer *renewal.Renewer

	ctx    context.Context
	cancel context.CancelFunc
	done   <-chan struct{}
}

// NewSession grants a lease (or adopts the one given by WithLease) and keeps
// it alive in the background until the session's context ends, the client
// closes, or the holder deadline passes: the send time of the last renewal
// the server confirmed plus TTL·(1 − 2·0.01) minus the lock delay
// (WithLockDelay). An adopted lease is renewed once before NewSession
// returns, to learn its TTL and start the deadline; if that renewal fails
// (the lease does not exist, or the server cannot confirm it) the session
// is returned already ended, where etcd's would end at the first failed
// keep-alive answer or retry.
func NewSession(client *clientv3.Client, opts ...SessionOption) (*Session, error) {
	o := sessionOptions{ttl: defaultSessionTTL, ctx: client.Ctx()}
	for _, apply := range opts {
		apply(&o)
	}
	if o.borrowed {
		return newBorrowedSession(client, o), nil
	}

	leaseID, ttl, sent, err := startLease(client, o)
	if err != nil {
		return nil, err
	}
	delay := renewal.DefaultLockDelay(ttl) // 0 for a lease that does not exist
	if o.lockDelaySet && ttl > 0 {
		delay = o.lockDelay
	}
	renewer, err := renewal.Start(renewal.Config{Client: client, Lease: leaseID, TTL: ttl, Sent: sent, LockDelay: delay})
	if err != nil {
		if o.leaseID == clientv3.NoLease {
			_, _ = client.Revoke(o.ctx, leaseID) // granted for nothing
		}
		return nil, fmt.Errorf("session of lease %x: %w", int64(leaseID), err)
	}
	if ttl <= 0 {
		renewer.Stop() // the adopted lease does not exist: ended already
	}

	ctx, cancel := context.WithCancel(o.ctx)
	done := make(chan struct{})
	s := &Session{client: client, opts: o, leaseID: leaseID, renewer: renewer, ctx: ctx, cancel: cancel, done: done}
	go func() {
		// Whatever ends first ends the session: the holder deadline or
		// the lease's end, the session's context, or the client.
		defer close(done)
		defer cancel()
		select {
		case <-renewer.Done():
		case <-ctx.Done():
		case <-client.Ctx().Done():
		}
		renewer.Stop()
	}()
	return s, nil
}

// newBorrowedSession is the session of WithBorrowedLease: no request, no
// renewer, no deadline; it ends with its context or the client.
func newBorrowedSession(client *clientv3.Client, o sessionOptions) *Session {
	ctx, cancel := context.WithCancel(o.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		select {
		case <-ctx.Done():
		case <-client.Ctx().Done():
		}
	}()
	return &Session{client: client, opts: o, leaseID: o.leaseID, ctx: ctx, cancel: cancel, done: done}
}

// startLease grants the session's lease, or renews the adopted one once,
// and returns its TTL (0 when an adopted lease does not exist) and the
// time the request was sent, from which the lease's deadline counts.
func startLease(client *clientv3.Client, o sessionOptions) (clientv3.LeaseID, time.Duration, time.Time, error) {
	sent := time.Now()
	if o.leaseID == clientv3.NoLease {
		grant, err := client.Grant(o.ctx, int64(o.ttl))
		if err != nil {
			return 0, 0, sent, err
		}
		return grant.ID, time.Duration(grant.TTL) * time.Second, sent, nil
	}
	if o.leaseID < 0 {
		// Lease IDs are positive: this one cannot exist (pkg/etcdcompat's
		// Leader and Observe pass -1 for a session they never use).
		return o.leaseID, 0, sent, nil
	}
	resp, err := client.KeepAliveOnce(o.ctx, o.leaseID)
	switch {
	case err != nil && o.ctx.Err() != nil:
		return 0, 0, sent, err
	case err != nil:
		// Not found, or not confirmed: without a confirmed renewal
		// nothing says the lease is alive, so the session starts ended
		// (etcd's would end at the first failed keep-alive answer).
		return o.leaseID, 0, sent, nil
	}
	return o.leaseID, time.Duration(resp.TTL) * time.Second, sent, nil
}

// Client is the client the session was created with.
func (s *Session) Client() *clientv3.Client { return s.client }

// Lease is the ID of the session's lease.
func (s *Session) Lease() clientv3.LeaseID { return s.leaseID }

// Ctx is cancelled when the session ends: orphaned, closed, expired, no
// longer renewed, or past its holder deadline. Give it to the work done
// under a mutex or as election leader, so the work stops when the session
// can no longer be sure it holds.
func (s *Session) Ctx() context.Context { return s.ctx }

// Done is closed when the session ends: orphaned, closed, expired, no
// longer renewed, or past its holder deadline (see Deadline).
func (s *Session) Done() <-chan struct{} { return s.done }

// Deadline is the holder deadline of the last confirmed renewal: the
// session ends then unless a later renewal is confirmed first. It is a
// MetaStore addition to etcd's API.
// A session on a borrowed lease (WithBorrowedLease) knows no deadline:
// it returns the zero time.
func (s *Session) Deadline() time.Time {
	if s.renewer == nil {
		return time.Time{}
	}
	return s.renewer.Deadline()
}

// expired reports whether the session ended on its own: its holder
// deadline passed or the server said its lease is gone (not Orphan,
// Close, or the end of its context).
func (s *Session) expired() bool {
	if s.renewer == nil {
		return false // borrowed: the lease's owner judges
	}
	err := s.renewer.Err()
	return errors.Is(err, renewal.ErrDeadlinePassed) || errors.Is(err, renewal.ErrLeaseGone)
}

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
	ttl          int
	leaseID      clientv3.LeaseID
	ctx          context.Context
	lockDelay    time.Duration
	lockDelaySet bool // else the default for the TTL
	borrowed     bool // WithBorrowedLease: never renewed or revoked here
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

// WithBorrowedLease makes the session use a lease that somebody else
// keeps alive, as etcd's Lock and Election services use their caller's:
// NewSession makes no request (etcd's WithLease session does none before
// returning either), the session never renews the lease, knows no holder
// deadline (Deadline is the zero time) and ends only with its context or
// the client. Close still revokes the lease. It is a MetaStore addition to
// etcd's API, for servers acting on a caller's behalf; a holder that
// renews its own lease wants WithLease.
func WithBorrowedLease(leaseID clientv3.LeaseID) SessionOption {
	return func(o *sessionOptions) { o.leaseID, o.borrowed = leaseID, true }
}

// WithContext sets the context that bounds NewSession and Close and parents
// the session's own context, instead of the client's. Cancelling it ends
// the session; if that happens before Close revokes the lease, the lease is
// left to expire.
func WithContext(ctx context.Context) SessionOption {
	return func(o *sessionOptions) { o.ctx = ctx }
}

// WithLockDelay sets the lock delay D: the session ends D before the last
// moment its lease could still be alive by its own renewals, leaving the
// holder D to stop working under the lock before anybody else can be
// granted it. The default is one second, capped at a quarter of the TTL;
// NewSession refuses a delay above half the TTL. It is a MetaStore
// addition to etcd's API.
func WithLockDelay(d time.Duration) SessionOption {
	return func(o *sessionOptions) { o.lockDelay, o.lockDelaySet = d, true }
}
