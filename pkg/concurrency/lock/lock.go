package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	token       int64 // create revision of key, set once the key exists

	// renewedAt (unix nanoseconds) and ttl (nanoseconds) give the local
	// deadline: the lease cannot outlive renewedAt + ttl on the server, as
	// renewedAt is taken no later than the server's own renewal.
	renewedAt atomic.Int64
	ttl       atomic.Int64

	stopRenewal  context.CancelFunc
	renewalEnded chan struct{} // closed when background renewal stops

	stopMonitor context.CancelFunc // nil until held
	monitorDone chan struct{}

	lost     chan struct{}
	lostOnce sync.Once
	lostErr  error // written before lost is closed

	unlockMu sync.Mutex // serialises Unlock calls
	released atomic.Bool
}

// newLock starts renewing lease for a contender for name; the contender
// has not joined the queue yet.
func (l *Locker) newLock(name string, lease clientv3.LeaseID, ttl time.Duration, o options) (*Lock, error) {
	// Taken before the keep-alive starts, so it is no later than any
	// renewal the server performs for it.
	start := time.Now()
	renewCtx, stopRenewal := context.WithCancel(context.Background())
	keepAlive, err := l.client.KeepAlive(renewCtx, lease)
	if err != nil {
		stopRenewal()
		return nil, fmt.Errorf("keep lease alive: %w", err)
	}
	queuePrefix := l.prefix + name + "/"
	h := &Lock{
		locker:       l,
		client:       l.client,
		name:         name,
		queuePrefix:  queuePrefix,
		key:          fmt.Sprintf("%s%x", queuePrefix, int64(lease)),
		lease:        lease,
		stopRenewal:  stopRenewal,
		renewalEnded: make(chan struct{}),
		monitorDone:  make(chan struct{}),
		lost:         make(chan struct{}),
	}
	h.renewedAt.Store(start.UnixNano())
	h.ttl.Store(int64(ttl))
	go h.consumeRenewals(keepAlive)
	return h, nil
}

// consumeRenewals records every keep-alive response until the client
// closes the channel: renewal was stopped, or the lease is gone.
func (h *Lock) consumeRenewals(keepAlive <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(h.renewalEnded)
	for resp := range keepAlive {
		// The request left at least one round trip before now; the time
		// of receipt is what the client knows.
		h.renewedAt.Store(time.Now().UnixNano())
		if resp.TTL > 0 {
			h.ttl.Store(int64(time.Duration(resp.TTL) * time.Second))
		}
	}
}

// held switches a contender that acquired the lock to holder mode: stop
// renewing if renewal is manual, and start watching for loss.
func (h *Lock) held(manualRenewal bool) {
	if manualRenewal {
		h.stopRenewal()
		<-h.renewalEnded
	}
	ctx, stop := context.WithCancel(context.Background())
	h.stopMonitor = stop
	go h.monitor(ctx, !manualRenewal)
}

// abandon gives up a contender that did not get (or keep) the lock:
// renewal stops and the lease is revoked, which deletes its key.
func (h *Lock) abandon() {
	h.released.Store(true)
	if h.stopMonitor != nil {
		h.stopMonitor()
		<-h.monitorDone
	}
	h.stopRenewal()
	<-h.renewalEnded
	h.locker.revoke(context.Background(), h.lease)
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

// Lost is closed when the lock is lost while held: the lease expired or
// could not be renewed, the key was deleted, a guarded write found it gone,
// or the local TTL deadline passed without renewal. It is not closed by
// Unlock.
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

// deadline is the latest time the lease can still be alive on the server
// given the renewals this client has seen.
func (h *Lock) deadline() time.Time {
	return time.Unix(0, h.renewedAt.Load()).Add(time.Duration(h.ttl.Load()))
}

// IsExpired reports, without a round trip, whether the lock is lost or may
// be: Lost is closed, or a whole TTL passed since the last renewal this
// client saw. A false answer is a hint, not a guarantee; use Guard for
// writes that must not happen after the lock is gone.
func (h *Lock) IsExpired() bool {
	select {
	case <-h.lost:
		return true
	default:
		return !time.Now().Before(h.deadline())
	}
}

// TTL asks the server how long the lock's lease has left. It returns an
// error wrapping ErrOwnershipLost when the lease is gone.
func (h *Lock) TTL(ctx context.Context) (time.Duration, error) {
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

// Renew renews the lease once, pushing the deadline a full TTL ahead. With
// WithManualRenewal it is the only renewal; otherwise it is rarely needed.
func (h *Lock) Renew(ctx context.Context) error {
	if h.released.Load() {
		return fmt.Errorf("lock %q: renew: %w", h.name, ErrLockNotHeld)
	}
	if err := h.Err(); err != nil {
		return err
	}
	sent := time.Now()
	resp, err := h.client.KeepAliveOnce(ctx, h.lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		h.markLost("the lease expired before it was renewed")
		return h.lostErr
	}
	if err != nil {
		return fmt.Errorf("lock %q: renew: %w", h.name, err)
	}
	h.renewedAt.Store(sent.UnixNano())
	h.ttl.Store(int64(time.Duration(resp.TTL) * time.Second))
	return nil
}

// Unlock releases the lock if this handle still holds it. It returns an
// error wrapping ErrOwnershipLost when the key was already gone or replaced
// (the lock expired; another owner may hold it now), and ErrLockNotHeld
// when the handle was already released. After a network error the handle
// still holds the lock and Unlock may be retried.
func (h *Lock) Unlock(ctx context.Context) error {
	h.unlockMu.Lock()
	defer h.unlockMu.Unlock()
	if h.released.Load() {
		return fmt.Errorf("lock %q: unlock: %w", h.name, ErrLockNotHeld)
	}
	resp, err := h.client.Txn(ctx).If(h.ownerCmp()).Then(clientv3.OpDelete(h.key)).Commit()
	if err != nil {
		return fmt.Errorf("lock %q: unlock: %w", h.name, err)
	}
	if !resp.Succeeded {
		h.markLost("the key was gone or replaced at unlock")
	}
	h.released.Store(true)
	h.locker.forget(h)
	h.stopMonitor()
	<-h.monitorDone
	h.stopRenewal()
	<-h.renewalEnded
	h.locker.revoke(ctx, h.lease)
	if !resp.Succeeded {
		return h.lostErr
	}
	return nil
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
		h.locker.forget(h)
		h.locker.log.Warn("lock lost", "lock", h.name, "key", h.key, "token", h.token, "cause", cause)
	})
}

// monitor closes Lost when the lock is lost while held. It watches three
// things: the end of background renewal (when renewing), the deletion of
// the key, and the local deadline. It returns when ctx (Unlock) ends.
func (h *Lock) monitor(ctx context.Context, renewing bool) {
	defer close(h.monitorDone)
	var renewalEnded <-chan struct{}
	if renewing {
		renewalEnded = h.renewalEnded
	}
	timer := time.NewTimer(time.Until(h.deadline()))
	defer timer.Stop()
	watchFrom := h.token + 1
	for {
		watchCtx, stopWatch := context.WithCancel(ctx)
		lost, cause, next := h.watchKey(watchCtx, watchFrom, renewalEnded, timer)
		stopWatch()
		if ctx.Err() != nil {
			return
		}
		if lost {
			h.markLost(cause)
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

// watchKey watches the key from revision from until it is deleted (lost),
// renewal ends (lost), the deadline passes (lost), ctx ends, or the watch
// closes; next is the revision to resume from.
func (h *Lock) watchKey(ctx context.Context, from int64, renewalEnded <-chan struct{}, timer *time.Timer) (lost bool, cause string, next int64) {
	next = from
	watch := h.client.Watch(ctx, h.key, clientv3.WithRev(from))
	for {
		select {
		case <-ctx.Done():
			return false, "", next
		case <-renewalEnded:
			return true, "lease renewal ended: the lease expired or the server was unreachable for a whole TTL", next
		case <-timer.C:
			left := time.Until(h.deadline())
			if left <= 0 {
				return true, "a whole TTL passed without a renewal", next
			}
			timer.Reset(left)
		case wr, ok := <-watch:
			if !ok || wr.Err() != nil {
				return false, "", next
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return true, "the key was deleted", next
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
