package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency/internal/renewal"
)

// Lock is one acquisition of a named lock: the holder's handle. Its methods
// are safe for concurrent use.
type Lock struct {
	locker      *Locker
	client      *clientv3.Client
	name        string
	queuePrefix string // locker prefix + name + "/"
	key         string // queuePrefix + hex(lease)
	lease       clientv3.LeaseID
	token       int64         // create revision of key, set once the key exists
	reqTimeout  time.Duration // bounds each request made for the caller

	// renewer renews the lease and ends at the holder deadline: the send
	// time of the last confirmed renewal plus TTL·(1 − 2ρ) − lock delay.
	renewer *renewal.Renewer

	stopMonitor context.CancelFunc // nil until held
	monitorDone chan struct{}

	lost     chan struct{}
	lostOnce sync.Once
	lostErr  error // written before lost is closed

	// holdCtx is the critical section's context: cancelled (with the
	// cause) when the lock is lost or released.
	holdCtx    context.Context
	cancelHold context.CancelCauseFunc

	unlockMu sync.Mutex // serialises Unlock calls
	released atomic.Bool
}

// newLock starts renewing lease, granted with ttl by a request sent at
// sent, for a contender for name; the contender has not joined the queue
// yet.
func (l *Locker) newLock(name string, lease clientv3.LeaseID, ttl time.Duration, sent time.Time, o options) (*Lock, error) {
	delay := o.lockDelay
	if delay == 0 {
		delay = renewal.DefaultLockDelay(ttl)
	}
	renewer, err := renewal.Start(renewal.Config{Client: l.client, Lease: lease, TTL: ttl, Sent: sent, LockDelay: delay})
	if err != nil {
		return nil, fmt.Errorf("keep lease alive: %w", err)
	}
	queuePrefix := l.prefix + name + "/"
	holdCtx, cancelHold := context.WithCancelCause(context.Background())
	return &Lock{
		locker:      l,
		client:      l.client,
		name:        name,
		queuePrefix: queuePrefix,
		key:         fmt.Sprintf("%s%x", queuePrefix, int64(lease)),
		lease:       lease,
		reqTimeout:  o.reqTimeout,
		renewer:     renewer,
		monitorDone: make(chan struct{}),
		lost:        make(chan struct{}),
		holdCtx:     holdCtx,
		cancelHold:  cancelHold,
	}, nil
}

// held switches a contender that acquired the lock to holder mode: stop
// background renewal if renewal is manual (the deadline still applies),
// and start watching for loss.
func (h *Lock) held(manualRenewal bool) {
	if manualRenewal {
		h.renewer.Manual()
	}
	ctx, stop := context.WithCancel(context.Background())
	h.stopMonitor = stop
	go h.monitor(ctx)
}

// abandon gives up a contender that did not get (or keep) the lock:
// renewal stops and the lease is revoked, which deletes its key.
func (h *Lock) abandon() {
	h.released.Store(true)
	if h.stopMonitor != nil {
		h.stopMonitor()
		<-h.monitorDone
	}
	h.renewer.Stop()
	h.cancelHold(ErrLockNotHeld)
	h.locker.revoke(context.Background(), h.lease, h.reqTimeout)
}

// Name is the lock's name.
func (h *Lock) Name() string { return h.name }

// Key is the holder's key in the store.
func (h *Lock) Key() string { return h.key }

// Lease is the ID of the lock's lease.
func (h *Lock) Lease() clientv3.LeaseID { return h.lease }

// FencingToken is the create revision of the holder's key. Successive
// holders of a name get strictly increasing tokens; pass it to any resource
// the lock protects, and have the resource refuse tokens lower than the
// highest it has seen.
func (h *Lock) FencingToken() int64 { return h.token }

// Lost is closed when the lock is lost while held, or must be assumed
// lost: the holder deadline passed without a confirmed renewal (see
// Deadline), the server said the lease is gone, the key was deleted, or a
// guarded write found it gone. It is not closed by Unlock.
func (h *Lock) Lost() <-chan struct{} { return h.lost }

// Err is nil while the lock is held and, once Lost is closed, an error
// wrapping ErrOwnershipLost that says why.
func (h *Lock) Err() error {
	select {
	case <-h.lost:
		return h.lostErr
	default:
		return nil
	}
}

// Deadline is the holder deadline: the send time of the last renewal
// the server confirmed plus TTL·(1 − 2ρ) − lock delay (ρ = 1%). Lost is
// closed when it passes without a later confirmed renewal; nobody else can
// be granted the lock before the lock delay after it.
func (h *Lock) Deadline() time.Time { return h.renewer.Deadline() }

// Context is cancelled when the lock is lost (its cause is Err) or
// released (cause ErrLockNotHeld). Run the critical section under it.
func (h *Lock) Context() context.Context { return h.holdCtx }

// ContextAs is Context with causes in a caller's own terms: when the lock
// is lost the cause wraps lost and the lock's cause, when it is released
// the cause is released. Facades over this package use it to report their
// own errors.
func (h *Lock) ContextAs(lost, released error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	context.AfterFunc(h.holdCtx, func() {
		if cause := context.Cause(h.holdCtx); errors.Is(cause, ErrOwnershipLost) {
			cancel(fmt.Errorf("%w: %w", lost, cause))
		} else {
			cancel(released)
		}
	})
	return ctx
}

// IsExpired reports, without a round trip, whether the lock is lost or
// must be assumed lost: Lost is closed, or the holder deadline has passed.
// A false answer is a hint, not a guarantee; use Guard for writes that
// must not happen after the lock is gone.
func (h *Lock) IsExpired() bool {
	select {
	case <-h.lost:
		return true
	default:
		return !time.Now().Before(h.Deadline())
	}
}

// TTL asks the server how long the lock's lease has left. It returns an
// error wrapping ErrOwnershipLost when the lease is gone or the lock was
// already lost (its deadline passed), without asking.
func (h *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if err := h.Err(); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.reqTimeout)
	defer cancel()
	resp, err := h.client.TimeToLive(ctx, h.lease)
	if err != nil {
		return 0, fmt.Errorf("lock %q: time to live: %w", h.name, err)
	}
	if resp.TTL <= 0 {
		h.markLost("the lease has expired")
		return 0, h.lostErr
	}
	return time.Duration(resp.TTL) * time.Second, nil
}

// Renew renews the lease once, moving the deadline to this renewal's
// send time plus the validity. With WithManualRenewal it is the only
// renewal; otherwise it is rarely needed. A renewal after the deadline is
// refused: the holder has been told it lost the lock.
func (h *Lock) Renew(ctx context.Context) error {
	if h.released.Load() {
		return fmt.Errorf("lock %q: renew: %w", h.name, ErrLockNotHeld)
	}
	if err := h.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, h.reqTimeout)
	defer cancel()
	err := h.renewer.RenewOnce(ctx)
	switch {
	case errors.Is(err, renewal.ErrLeaseGone):
		h.markLost("the lease expired before it was renewed")
		return h.lostErr
	case errors.Is(err, renewal.ErrDeadlinePassed):
		h.markLost(deadlineCause)
		return h.lostErr
	case err != nil:
		return fmt.Errorf("lock %q: renew: %w", h.name, err)
	}
	return nil
}

// deadlineCause is why a lock whose holder deadline passed is lost.
const deadlineCause = "the holder deadline passed: no renewal was confirmed within TTL·(1 − 2ρ) − lock delay of the last one's send"

// Unlock releases the lock if this handle still holds it. It returns an
// error wrapping ErrOwnershipLost when the key was already gone or replaced
// (the lock expired; another owner may hold it now) or when the lock had
// been lost before (its deadline passed: the key is deleted all the same,
// so the next waiter need not wait for the lease to expire), and
// ErrLockNotHeld when the handle was already released.
//
// Unlock returns within the request timeout (WithRequestTimeout). When
// the member does not answer within it, Unlock gives the lock up
// unreleased: it stops renewing the lease, releases the handle (a later
// Unlock returns ErrLockNotHeld) and returns an error wrapping
// context.DeadlineExceeded; the key then goes when the lease expires,
// within a TTL, instead of being kept alive behind a caller that has
// moved on. After any other error (the member answered with one, or ctx
// ended first) the handle still holds the lock and Unlock may be
// retried.
func (h *Lock) Unlock(ctx context.Context) error {
	h.unlockMu.Lock()
	defer h.unlockMu.Unlock()
	if h.released.Load() {
		return fmt.Errorf("lock %q: unlock: %w", h.name, ErrLockNotHeld)
	}
	// Read before the delete: the monitor may see this very delete and
	// call it a loss before it is stopped.
	lostBefore := h.Err()
	reqCtx, cancel := context.WithTimeout(ctx, h.reqTimeout)
	defer cancel()
	resp, err := h.client.Txn(reqCtx).If(h.ownerCmp()).Then(clientv3.OpDelete(h.key)).Commit()
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		h.release()
		// The member may answer again before the lease expires.
		go h.locker.revoke(ctx, h.lease, h.reqTimeout)
		return fmt.Errorf("lock %q: unlock: no answer within the request timeout (%v), renewal stopped: the key goes when its lease expires: %w",
			h.name, h.reqTimeout, err)
	}
	if err != nil {
		return fmt.Errorf("lock %q: unlock: %w", h.name, err)
	}
	if !resp.Succeeded {
		h.markLost("the key was gone or replaced at unlock")
		lostBefore = h.lostErr
	}
	h.release()
	// Bounded by what the request timeout left: the key is gone, an
	// unrevoked lease only expires.
	if deadline, ok := reqCtx.Deadline(); ok {
		h.locker.revoke(ctx, h.lease, time.Until(deadline))
	}
	return lostBefore
}

// release ends the handle: no more renewals, no more loss reports, and
// the Locker forgets it. The lease is left to the caller.
func (h *Lock) release() {
	h.released.Store(true)
	h.locker.forget(h)
	h.stopMonitor()
	<-h.monitorDone
	h.renewer.Stop()
	h.cancelHold(ErrLockNotHeld)
}

// ownerCmp holds while the holder's key exists with its original create
// revision, that is while this handle holds the lock.
func (h *Lock) ownerCmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.token)
}

// markLost records why the lock was lost and closes Lost, once.
func (h *Lock) markLost(cause string) {
	h.lostOnce.Do(func() {
		h.lostErr = fmt.Errorf("lock %q (token %d): %w: %s", h.name, h.token, ErrOwnershipLost, cause)
		close(h.lost)
		h.cancelHold(h.lostErr)
		h.locker.forget(h)
		h.locker.log.Warn("lock lost", "lock", h.name, "key", h.key, "token", h.token, "cause", cause)
	})
}

// monitor closes Lost when the lock is lost while held: the renewer ends
// (the holder deadline, or the server saying the lease is gone), or the
// key is deleted. The two are watched apart, so a read of the key stuck
// on an unresponsive member never holds up the deadline. It returns when
// ctx (Unlock) ends or the lock is lost.
func (h *Lock) monitor(ctx context.Context) {
	defer close(h.monitorDone)
	ctx, cancel := context.WithCancel(ctx)
	renewalWatched := make(chan struct{})
	go func() {
		defer close(renewalWatched)
		select {
		case <-ctx.Done():
		case <-h.renewer.Done():
			switch err := h.renewer.Err(); {
			case errors.Is(err, renewal.ErrLeaseGone):
				h.markLost("the server says the lease expired or was revoked")
			case errors.Is(err, renewal.ErrDeadlinePassed):
				h.markLost(deadlineCause)
			}
			cancel()
		}
	}()
	h.monitorKey(ctx)
	cancel()
	<-renewalWatched
}

// monitorKey closes Lost when the key is deleted; it returns then or when
// ctx ends.
func (h *Lock) monitorKey(ctx context.Context) {
	watchFrom := h.token + 1
	for {
		watchCtx, stopWatch := context.WithCancel(ctx)
		deleted, next := h.watchKey(watchCtx, watchFrom)
		stopWatch()
		if ctx.Err() != nil {
			return
		}
		if deleted {
			h.markLost("the key was deleted")
			return
		}
		// The watch ended without an answer (compaction, a server-side
		// cancel): check the key directly, then watch again.
		watchFrom = next
		if gone, rev := h.keyGone(ctx); gone {
			h.markLost("the key was deleted")
			return
		} else if rev > 0 {
			watchFrom = rev + 1
		}
		pause := time.NewTimer(h.locker.retryInterval)
		select {
		case <-ctx.Done():
			pause.Stop()
			return
		case <-pause.C:
		}
	}
}

// watchKey watches the key from revision from until it is deleted, ctx
// ends, or the watch closes; next is the revision to resume from.
func (h *Lock) watchKey(ctx context.Context, from int64) (deleted bool, next int64) {
	next = from
	watch := h.client.Watch(ctx, h.key, clientv3.WithRev(from))
	for {
		select {
		case <-ctx.Done():
			return false, next
		case wr, ok := <-watch:
			if !ok || wr.Err() != nil {
				return false, next
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return true, next
				}
			}
			next = wr.Header.Revision + 1
		}
	}
}

// keyGone reads the key: gone is true when it no longer exists with this
// holder's create revision; rev is the revision read at (0 on error).
func (h *Lock) keyGone(ctx context.Context) (gone bool, rev int64) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	resp, err := h.client.Get(ctx, h.key)
	if err != nil {
		return false, 0
	}
	return len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.token, resp.Header.Revision
}
