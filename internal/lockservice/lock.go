package lockservice

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/internal/queue"
	"github.com/metastore-io/metastore/pkg/lockapi"
)

// contender is one /lock request's place in a queue: a key attached to a
// lease that lives exactly as long as the request.
type contender struct {
	s      *Service
	name   string // Type:ResourceID, for logs
	node   string
	keyset resourceQueue
	key    string // this node's key in it
	lease  clientv3.LeaseID
	place  queue.Place
	creds  context.Context // the caller's credentials, without its cancellation
	ttl    time.Duration   // the lease's granted TTL

	renewedAt atomic.Int64 // unix nanoseconds of the grant or last renewal

	stopKeepAlive  context.CancelFunc
	keepAliveEnded chan struct{} // closed when the lease stops being renewed
}

// ending says why a stream ended: the metric reason and the last event.
type ending struct {
	reason string
	event  lockapi.Event
}

func (s *Service) serveLock(w http.ResponseWriter, r *http.Request) {
	var req lockapi.LockRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	if err := req.Validate(); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	if !bindConnection(r.Context(), s.cfg.WriteTimeout) {
		s.log.Debug("no TCP_USER_TIMEOUT on this connection; a vanished client is noticed by TCP keep-alive", "remote", r.RemoteAddr)
	}
	s.streams.Add(1)
	defer s.streams.Done()
	// The request's context ends when the client's connection closes;
	// stopping ends it when the member stops.
	ctx, cancel := context.WithCancel(withCredentials(r.Context(), r))
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()

	start := time.Now()
	c, err := s.join(ctx, req)
	if err != nil {
		if r.Context().Err() == nil {
			s.fail(w, statusOf(err), fmt.Errorf("join the queue of %s:%s: %w", req.Type, req.ResourceID, err))
		}
		return
	}
	defer c.leave()
	if req.NoWait && (c.place.Ahead > 0 || c.place.Existed) {
		c.busy(w)
		return
	}
	st := newStream(w, s.cfg.WriteTimeout)
	follow := c.followKey(ctx)
	if c.place.Ahead > 0 {
		if err := st.send(lockapi.Event{Status: lockapi.StatusQueued, Position: c.place.Ahead}); err != nil {
			s.metrics.abandoned.WithLabelValues(reasonDisconnect).Inc()
			return
		}
		s.metrics.waiting.Inc()
		end, acquired := c.wait(ctx, st, follow)
		s.metrics.waiting.Dec()
		if !acquired {
			s.metrics.abandoned.WithLabelValues(end.reason).Inc()
			s.log.Debug("waiter left the queue", "lock", c.name, "node", c.node, "reason", end.reason)
			_ = st.send(end.event)
			return
		}
	}
	s.metrics.acquisitions.Inc()
	s.metrics.waitSeconds.Observe(time.Since(start).Seconds())
	s.log.Debug("lock acquired", "lock", c.name, "node", c.node, "token", c.place.Rev)
	if err := st.send(lockapi.Event{Status: lockapi.StatusAcquired, Acquired: true, Token: c.place.Rev}); err != nil {
		s.metrics.releases.WithLabelValues(reasonDisconnect).Inc()
		return
	}
	held := time.Now()
	s.metrics.held.Inc()
	end := c.hold(ctx, st, follow)
	s.metrics.held.Dec()
	s.metrics.holdSeconds.Observe(time.Since(held).Seconds())
	s.metrics.releases.WithLabelValues(end.reason).Inc()
	s.log.Debug("lock ended", "lock", c.name, "node", c.node, "token", c.place.Rev, "reason", end.reason)
	_ = st.send(end.event)
}

// join grants the request's lease, starts renewing it and claims the
// node's place in the resource's queue.
func (s *Service) join(ctx context.Context, req lockapi.LockRequest) (*contender, error) {
	grant, err := s.client.Grant(ctx, int64(math.Ceil(s.cfg.LeaseTTL.Seconds())))
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	q := s.queueOf(req.Type, req.ResourceID)
	creds := context.WithoutCancel(ctx)
	renewCtx, stop := context.WithCancel(creds)
	c := &contender{
		s: s, name: req.Type + ":" + req.ResourceID, node: req.NodeID,
		keyset: q, key: q.nodeKey(req.NodeID), lease: grant.ID, creds: creds,
		ttl: time.Duration(grant.TTL) * time.Second, stopKeepAlive: stop, keepAliveEnded: make(chan struct{}),
	}
	c.renewedAt.Store(time.Now().UnixNano())
	go c.renew(renewCtx)
	// NoWait never takes over the node's place: see busy.
	c.place, err = queue.Claim(ctx, s.client, q.scope(), c.key, req.NodeID, grant.ID, !req.NoWait)
	if err != nil {
		c.leave()
		return nil, fmt.Errorf("claim a place: %w", err)
	}
	return c, nil
}

// renew keeps the lease alive every third of its TTL until ctx ends. Each
// renewal is its own call carrying the caller's credentials (clientv3's
// shared keep-alive stream carries none, and with authentication on the
// member wants them). It closes keepAliveEnded when it stops: the lease is
// gone, or could not be renewed for a whole TTL, or the request ended.
func (c *contender) renew(ctx context.Context) {
	defer close(c.keepAliveEnded)
	every := c.ttl / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		callCtx, cancel := context.WithTimeout(ctx, every)
		resp, err := c.s.client.KeepAliveOnce(callCtx, c.lease)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && resp.TTL > 0:
			c.renewedAt.Store(time.Now().UnixNano())
		case err == nil, errors.Is(err, rpctypes.ErrLeaseNotFound):
			return // expired or revoked
		case time.Since(c.renewed()) >= c.ttl:
			c.s.log.Warn("lock lease not renewed for a whole TTL", "lock", c.name, "node", c.node, "error", err)
			return
		}
	}
}

func (c *contender) renewed() time.Time { return time.Unix(0, c.renewedAt.Load()) }

// renewing reports whether the lease is being renewed on schedule: the
// renewal loop runs and the last renewal is under half a TTL old (it
// renews every third).
func (c *contender) renewing() bool {
	select {
	case <-c.keepAliveEnded:
		return false
	default:
		return time.Since(c.renewed()) < c.ttl/2
	}
}

// leave stops renewing and revokes the lease, which deletes the key unless
// a newer request of the same node took it over.
func (c *contender) leave() {
	c.stopKeepAlive()
	<-c.keepAliveEnded
	c.s.revoke(c.creds, c.lease)
}

// revoke drops a lease with the caller's credentials from ctx, bounded and
// whether or not ctx is cancelled.
func (s *Service) revoke(ctx context.Context, id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := s.client.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.log.Warn("revoke a lock lease failed; it expires on its own", "lease", fmt.Sprintf("%x", int64(id)), "error", err)
	}
}

// interrupted is the ending of a request whose context ended.
func (c *contender) interrupted() ending {
	if c.s.stopping.Err() != nil {
		return ending{reasonShutdown, lockapi.Event{Status: lockapi.StatusError, Error: "the member is stopping"}}
	}
	return ending{reason: reasonDisconnect}
}

func (c *contender) brokenStream(err error) ending {
	c.s.log.Debug("lock stream write failed", "lock", c.name, "node", c.node, "error", err)
	return ending{reason: reasonDisconnect}
}

// gone is the ending of a key deleted or taken over. A held key that is
// deleted while its lease is renewed on schedule was released (by
// /unlock, on any member); otherwise its lease expired and it was lost.
func (c *contender) gone(cause string, held bool) ending {
	if cause == lockapi.StatusSuperseded {
		return ending{reasonSuperseded, lockapi.Event{Status: lockapi.StatusSuperseded,
			Error: "a newer request of the same node holds this place"}}
	}
	if held && c.renewing() {
		return ending{reasonUnlock, lockapi.Event{Status: lockapi.StatusReleased, Token: c.place.Rev}}
	}
	return c.lost()
}

func (c *contender) lost() ending {
	return ending{reasonLost, lockapi.Event{Status: lockapi.StatusLost, Token: c.place.Rev,
		Error: "the lease expired: the member could not renew it"}}
}

// wait blocks until nobody is ahead in the queue, writing heartbeats. It
// reports acquired, or why the wait ended.
func (c *contender) wait(ctx context.Context, st *stream, follow <-chan string) (ending, bool) {
	heartbeat := time.NewTicker(c.s.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		awaitCtx, stopAwait := context.WithCancel(ctx)
		result := make(chan error, 1)
		go func() { result <- queue.AwaitScope(awaitCtx, c.s.client, c.keyset.scope(), c.place.Rev) }()
		end, acquired, retry := c.waitOnce(ctx, st, follow, heartbeat.C, result)
		stopAwait()
		if !retry {
			return end, acquired
		}
		pause := time.NewTimer(retryPause)
		select {
		case <-ctx.Done():
			pause.Stop()
			return c.interrupted(), false
		case <-pause.C:
		}
	}
}

func (c *contender) waitOnce(ctx context.Context, st *stream, follow <-chan string, beat <-chan time.Time, result <-chan error) (end ending, acquired, retry bool) {
	for {
		select {
		case <-ctx.Done():
			return c.interrupted(), false, false
		case <-beat:
			if err := st.heartbeat(); err != nil {
				return c.brokenStream(err), false, false
			}
		case cause := <-follow:
			return c.gone(cause, false), false, false
		case <-c.keepAliveEnded:
			return c.lost(), false, false
		case err := <-result:
			if err != nil {
				if ctx.Err() != nil {
					return c.interrupted(), false, false
				}
				c.s.log.Debug("waiting for the lock failed, retrying", "lock", c.name, "node", c.node, "error", err)
				return ending{}, false, true
			}
			return c.confirm(ctx)
		}
	}
}

// confirm checks, once nobody is ahead, that the key is still this
// request's: it may have expired or been taken over meanwhile.
func (c *contender) confirm(ctx context.Context) (ending, bool, bool) {
	resp, err := c.s.client.Get(ctx, c.key)
	switch {
	case err != nil && ctx.Err() != nil:
		return c.interrupted(), false, false
	case err != nil:
		return ending{}, false, true
	case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != c.place.Rev:
		return c.lost(), false, false
	case resp.Kvs[0].Lease != int64(c.lease):
		return c.gone(lockapi.StatusSuperseded, false), false, false
	}
	return ending{}, true, false
}

// hold keeps the lock until the client disconnects, /unlock deletes the
// key, or the lease is lost.
func (c *contender) hold(ctx context.Context, st *stream, follow <-chan string) ending {
	heartbeat := time.NewTicker(c.s.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return c.interrupted()
		case <-heartbeat.C:
			if err := st.heartbeat(); err != nil {
				return c.brokenStream(err)
			}
		case cause := <-follow:
			return c.gone(cause, true)
		case <-c.keepAliveEnded:
			return c.lost()
		}
	}
}

// followKey reports, once, when the key is deleted ("released") or taken
// over by a newer request of the same node (StatusSuperseded).
func (c *contender) followKey(ctx context.Context) <-chan string {
	out := make(chan string, 1)
	go func() {
		rev := c.place.Header.Revision + 1
		for ctx.Err() == nil {
			cause, next := c.watchKey(ctx, rev)
			if cause != "" {
				out <- cause
				return
			}
			// The watch ended without a verdict (compaction, a cancel by
			// the server): read the key, then watch again.
			resp, err := c.s.client.Get(ctx, c.key)
			switch {
			case err != nil:
				rev = next
			case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != c.place.Rev:
				out <- lockapi.StatusReleased
				return
			case resp.Kvs[0].Lease != int64(c.lease):
				out <- lockapi.StatusSuperseded
				return
			default:
				rev = resp.Header.Revision + 1
			}
			pause := time.NewTimer(retryPause)
			select {
			case <-ctx.Done():
				pause.Stop()
			case <-pause.C:
			}
		}
	}()
	return out
}

func (c *contender) watchKey(ctx context.Context, rev int64) (cause string, next int64) {
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	next = rev
	for wr := range c.s.client.Watch(watchCtx, c.key, clientv3.WithRev(rev)) {
		if wr.Err() != nil {
			return "", next
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return lockapi.StatusReleased, next
			}
			if ev.Kv.Lease != int64(c.lease) {
				return lockapi.StatusSuperseded, next
			}
		}
		next = wr.Header.Revision + 1
	}
	return "", next
}
