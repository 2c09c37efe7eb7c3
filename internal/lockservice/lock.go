package lockservice

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency/queue"
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
	valid  *validity       // how long the lease may be believed to hold

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
	s.bindConnection(w, r)
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
	st := newStream(w, s.cfg, req.ReportValidity)
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
	if !c.valid.valid() {
		end := c.expired()
		s.metrics.abandoned.WithLabelValues(end.reason).Inc()
		_ = st.send(end.event)
		return
	}
	s.metrics.acquisitions.Inc()
	s.metrics.waitSeconds.Observe(time.Since(start).Seconds())
	s.holdLock(ctx, c, st, follow)
}

// bindConnection bounds how long a vanished or deaf client of the /lock
// connection keeps its lock (see the function of that name).
func (s *Service) bindConnection(w http.ResponseWriter, r *http.Request) {
	if !bindConnection(r.Context(), s.cfg.WriteTimeout, r.ProtoMajor == 1) {
		s.log.Debug("no TCP_USER_TIMEOUT on this connection; a vanished client is noticed by TCP keep-alive", "remote", r.RemoteAddr)
	}
	if r.ProtoMajor == 1 {
		// The connection's send buffer is now small (bindConnection):
		// it carries no other request after this stream.
		w.Header().Set("Connection", "close")
	}
}

// holdLock tells the client it holds the lock and keeps it until the
// stream ends.
func (s *Service) holdLock(ctx context.Context, c *contender, st *stream, follow <-chan string) {
	s.log.Debug("lock acquired", "lock", c.name, "node", c.node, "token", c.place.Rev)
	if err := st.acquired(c.place.Rev, c.valid.remaining()); err != nil {
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
	sent := time.Now()
	grant, err := call(s, ctx, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) {
		return s.client.Grant(ctx, int64(math.Ceil(s.cfg.LeaseTTL.Seconds())))
	})
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	q := s.queueOf(req.Type, req.ResourceID)
	creds := context.WithoutCancel(ctx)
	renewCtx, stop := context.WithCancel(creds)
	ttl := time.Duration(grant.TTL) * time.Second
	c := &contender{
		s: s, name: req.Type + ":" + req.ResourceID, node: req.NodeID,
		keyset: q, key: q.nodeKey(req.NodeID), lease: grant.ID, creds: creds,
		ttl: ttl, valid: newValidity(sent, ttl, s.cfg.LockDelay),
		stopKeepAlive: stop, keepAliveEnded: make(chan struct{}),
	}
	go c.renew(renewCtx)
	// NoWait never takes over the node's place: see busy.
	c.place, err = call(s, ctx, func(ctx context.Context) (queue.Place, error) {
		return queue.Claim(ctx, s.client, q.scope(), c.key, req.NodeID, grant.ID, !req.NoWait)
	})
	if err != nil {
		c.leave()
		return nil, fmt.Errorf("claim a place: %w", err)
	}
	return c, nil
}

// renewal is the answer to one keep-alive sent at sent.
type renewal struct {
	sent time.Time
	ttl  int64
	err  error
}

// renew keeps the lease alive until ctx ends, the lease is gone, or the
// validity's deadline passes (then the lease is left to expire: that is
// what keeps the lock delay between the holder's deadline and the next
// grant). It renews every renewEvery; while a renewal is unanswered or
// failed it sends another every renewRetry, each with its own
// renewCallTimeout, so a slow answer does not hold up the next and a
// leader change is ridden through with the first renewal the new leader
// answers. Each renewal is its own call carrying the caller's credentials
// (clientv3's shared keep-alive stream carries none, and with
// authentication on the member wants them). It closes keepAliveEnded when
// it stops.
func (c *contender) renew(ctx context.Context) {
	defer close(c.keepAliveEnded)
	defer c.valid.stop()
	var calls sync.WaitGroup
	defer calls.Wait()
	results := make(chan renewal, maxRenewCalls)
	inFlight := 0
	next := time.NewTimer(renewEvery(c.ttl))
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.valid.expired:
			c.s.log.Warn("lock lease not renewed in time; the member stops believing it and lets it expire",
				"lock", c.name, "node", c.node)
			return
		case <-next.C:
			next.Reset(renewRetry) // until a renewal is confirmed
			if inFlight < maxRenewCalls {
				inFlight++
				calls.Add(1)
				go func() { defer calls.Done(); results <- c.renewOnce(ctx) }()
			}
		case r := <-results:
			inFlight--
			switch {
			case ctx.Err() != nil:
				return
			case r.err == nil && r.ttl > 0:
				c.valid.confirm(r.sent, time.Duration(r.ttl)*time.Second)
				next.Reset(renewEvery(c.ttl))
			case r.err == nil, errors.Is(r.err, rpctypes.ErrLeaseNotFound):
				return // expired or revoked
			default:
				c.s.log.Debug("lock lease renewal failed, retrying", "lock", c.name, "node", c.node, "error", r.err)
			}
		}
	}
}

// renewOnce sends one keep-alive, recording when it was sent: the leader
// received it no earlier, so the lease lives at least a TTL from then.
func (c *contender) renewOnce(ctx context.Context) renewal {
	ctx, cancel := context.WithTimeout(ctx, renewCallTimeout)
	defer cancel()
	sent := time.Now()
	resp, err := c.s.client.KeepAliveOnce(ctx, c.lease)
	if err != nil {
		return renewal{sent: sent, err: err}
	}
	return renewal{sent: sent, ttl: resp.TTL}
}

// renewing reports whether the lease is being renewed and may still be
// believed to hold.
func (c *contender) renewing() bool {
	select {
	case <-c.keepAliveEnded:
		return false
	default:
		return c.valid.valid()
	}
}

// leave stops renewing and revokes the lease, which deletes the key unless
// a newer request of the same node took it over. A lease past its
// validity's deadline is not revoked but left to expire: its holder may
// only just have stopped believing it holds, and revoking would grant the
// lock to the next waiter sooner than the lock delay after that.
func (c *contender) leave() {
	c.stopKeepAlive()
	<-c.keepAliveEnded
	if c.valid.valid() {
		c.s.revoke(c.creds, c.lease)
	}
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

// expired is the ending of a contender whose validity's deadline passed:
// the member could not get a renewal confirmed in time, so the lock must
// be assumed lost although the lease may still live for the lock delay.
func (c *contender) expired() ending {
	return ending{reasonLost, lockapi.Event{Status: lockapi.StatusLost, Token: c.place.Rev,
		Error: "the member could not renew the lease in time: the lock must be assumed lost"}}
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
		case <-c.valid.expired:
			return c.expired(), false, false
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
	resp, err := call(c.s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) { return c.s.client.Get(ctx, c.key) })
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
// key, or the lease is lost or its validity's deadline passes.
func (c *contender) hold(ctx context.Context, st *stream, follow <-chan string) ending {
	heartbeat := time.NewTicker(c.s.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return c.interrupted()
		case <-heartbeat.C:
			valid := c.valid.remaining()
			if valid == 0 { // the timer is about to say so
				return c.expired()
			}
			if err := st.held(c.place.Rev, valid); err != nil {
				return c.brokenStream(err)
			}
		case <-c.valid.expired:
			return c.expired()
		case cause := <-follow:
			return c.gone(cause, true)
		case <-c.keepAliveEnded:
			if !c.valid.valid() {
				return c.expired()
			}
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
			resp, err := call(c.s, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) { return c.s.client.Get(ctx, c.key) })
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
