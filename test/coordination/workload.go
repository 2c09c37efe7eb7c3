package coordination

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/pkg/concurrency/lock"
	"github.com/metastore-io/metastore/pkg/lockclient"
	"github.com/metastore-io/metastore/test/framework"
)

const (
	// resources is how many locks of each API the clients contend for.
	resources = 3
	// clientsPerResource contend for each lock, spread over the members.
	clientsPerResource = 4
	// lockType is the HTTP service's Type of every resource.
	lockType = "coord"
	// sdkPrefix is where the SDK's locks keep their queues.
	sdkPrefix = "/coordination/"
	// leaseTTL is the lease TTL of the SDK's locks, the HTTP service's
	// default one.
	leaseTTL = 5 * time.Second
	// lockWait bounds one lock call, queueing included: long enough that
	// the checker, not this context, decides when a waiter is hung.
	lockWait = 60 * time.Second
	// unlockWait bounds an SDK contender's unlock calls, retries
	// included, the same way (lockclient's Unlock has its own
	// per-request timeout).
	unlockWait = 30 * time.Second
	// retryPause spaces a client's lock calls after a failed one.
	retryPause = 100 * time.Millisecond
	// shortHoldMin..shortHoldMax is a usual hold. One hold in
	// longHoldEvery lasts longHoldMin..longHoldMax instead: longer than
	// its lease outlives a member frozen just after the grant (a TTL
	// after the last renewal; a TTL and an election timeout after a new
	// leader's election when the leader froze), so a holder that is not
	// told it lost the lock is still at work when the next one is
	// granted. The freezes and cuts aim at such a hold.
	shortHoldMin  = 20 * time.Millisecond
	shortHoldMax  = 300 * time.Millisecond
	longHoldEvery = 8
	longHoldMin   = 8 * time.Second
	longHoldMax   = 11 * time.Second
)

// contender is one client of the workload: it locks one resource through
// one member, over and over.
type contender interface {
	cycle(ctx context.Context, hist *History, rng *rand.Rand)
	close()
}

// workload is the set of contenders.
type workload struct {
	contenders []contender
	hist       *History
	seed       uint64
	wg         sync.WaitGroup
}

// newWorkload builds clientsPerResource contenders per lock of each API,
// contender j of a lock bound to member (lock + j) mod size.
func newWorkload(c *framework.Cluster, hist *History, seed uint64) (*workload, error) {
	tlsCfg, err := c.TLS().ClientTLS()
	if err != nil {
		return nil, fmt.Errorf("client TLS: %w", err)
	}
	w := &workload{hist: hist, seed: seed}
	members := c.Members()
	for r := range resources {
		for j := range clientsPerResource {
			m := members[(r+j)%len(members)]
			name := fmt.Sprintf("c%d%d@%s", r, j, m.Name())
			w.contenders = append(w.contenders, newHTTPContender(fmt.Sprintf("r%d", r), "http-"+name, m, tlsCfg))
			sdk, err := newSDKContender(fmt.Sprintf("r%d", r), "sdk-"+name, m, tlsCfg)
			if err != nil {
				w.close()
				return nil, err
			}
			w.contenders = append(w.contenders, sdk)
		}
	}
	return w, nil
}

// start runs every contender until ctx ends; wait waits for them.
func (w *workload) start(ctx context.Context) {
	for i, c := range w.contenders {
		rng := rand.New(rand.NewPCG(w.seed, uint64(i)))
		w.wg.Go(func() {
			for ctx.Err() == nil {
				c.cycle(ctx, w.hist, rng)
			}
		})
	}
}

// wait waits for the contenders to finish their last cycle, at most
// bound; it reports whether they did.
func (w *workload) wait(bound time.Duration) bool {
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(bound):
		return false
	}
}

func (w *workload) close() {
	for _, c := range w.contenders {
		c.close()
	}
}

// holdTime draws how long a holder works under the lock.
func holdTime(rng *rand.Rand) time.Duration {
	if rng.IntN(longHoldEvery) == 0 {
		return longHoldMin + time.Duration(rng.Int64N(int64(longHoldMax-longHoldMin)))
	}
	return shortHoldMin + time.Duration(rng.Int64N(int64(shortHoldMax-shortHoldMin)))
}

// work holds the lock for d, or until lost fires; it ends the belief and
// reports whether the lock was lost. A holder that still believes writes
// to the resource once more before it lets go: the write a stale holder
// would get wrong, and the fenced resource refuses.
func work(hist *History, hold *Hold, d time.Duration, lost <-chan struct{}, why func() error) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-lost:
		hist.EndHold(hold, EndLost, fmt.Sprint(why()))
		return true
	case <-timer.C:
	}
	hist.Write(hold)
	hist.EndHold(hold, EndUnlock, "")
	return false
}

// pause waits d or until ctx ends. The suite paces holds, faults and
// calms in wall-clock time: these waits are the experiment, never a
// synchronisation (that goes by events: readiness, the history).
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// httpContender locks through one member's HTTP lock service.
type httpContender struct {
	resource string // the lock's name in the history
	id       string
	node     string
	client   *lockclient.Client
	tr       *http.Transport
}

func newHTTPContender(resource, name string, m *framework.Member, tlsCfg *tls.Config) *httpContender {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	// One attempt per call: the checker times what one request does,
	// and a retry would queue the node again elsewhere.
	client, err := lockclient.New(lockclient.Config{Endpoints: []string{m.ClientURL()}, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: answerTransport{tr}}})
	if err != nil {
		// lockclient.New fails only on a malformed endpoint; the
		// framework builds them.
		panic(fmt.Sprintf("lockclient for %s: %v", m.ClientURL(), err))
	}
	return &httpContender{resource: string(APIHTTP) + "/" + resource, id: resource, node: name, client: client, tr: tr}
}

func (c *httpContender) cycle(ctx context.Context, hist *History, rng *rand.Rand) {
	call := hist.StartCall(c.resource, c.node, APIHTTP, OpLock)
	// lockclient ties the held lock's stream to Lock's context: it must
	// outlive the hold, while ctx and lockWait bound only the wait.
	streamCtx, endStream := context.WithCancel(withCall(context.WithoutCancel(ctx), hist, call))
	defer endStream()
	var granted atomic.Bool
	giveUp := func() {
		if !granted.Load() {
			endStream()
		}
	}
	stopOnEnd := context.AfterFunc(ctx, giveUp)
	waitTimer := time.AfterFunc(lockWait, giveUp)
	l, err := c.client.Lock(streamCtx, lockclient.Request{Type: lockType, ResourceID: c.id, NodeID: c.node,
		OnQueued: func(int) { hist.Queued(call) }})
	granted.Store(true)
	stopOnEnd()
	waitTimer.Stop()
	if err != nil {
		hist.EndCall(call, err)
		pause(ctx, retryPause)
		return
	}
	d := holdTime(rng)
	hold := hist.Grant(call, l.Token(), d)
	if work(hist, hold, d, l.Lost(), l.Err) {
		l.Close()
		return
	}
	unlock := hist.StartCall(c.resource, c.node, APIHTTP, OpUnlock)
	_, err = l.Unlock(context.WithoutCancel(ctx), true, nil)
	hist.EndCall(unlock, err)
}

func (c *httpContender) close() { c.tr.CloseIdleConnections() }

// answerKey carries what answerTransport calls on every read of a
// response body of the request's context.
type answerKey struct{}

// withAnswers makes answerTransport call answer on every read of the
// response bodies of requests made with ctx.
func withAnswers(ctx context.Context, answer func()) context.Context {
	return context.WithValue(ctx, answerKey{}, answer)
}

// withCall records every read as an answer of call.
func withCall(ctx context.Context, hist *History, call *Call) context.Context {
	return withAnswers(ctx, func() { hist.Answer(call) })
}

// answerTransport reports every read of a response body (withAnswers):
// the /lock stream's events and heartbeats, which lockclient reads but
// does not show.
type answerTransport struct{ base http.RoundTripper }

func (t answerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if answer, ok := req.Context().Value(answerKey{}).(func()); ok && err == nil {
		resp.Body = &answerBody{ReadCloser: resp.Body, answer: answer}
	}
	return resp, err
}

type answerBody struct {
	io.ReadCloser
	answer func()
}

func (b *answerBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.answer()
	}
	return n, err
}

// sdkContender locks through the SDK on a client bound to one member.
type sdkContender struct {
	resource string
	id       string
	node     string
	client   *clientv3.Client
	locker   *lock.Locker
}

func newSDKContender(resource, name string, m *framework.Member, tlsCfg *tls.Config) (*sdkContender, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{m.Endpoint()},
		TLS:         tlsCfg,
		DialTimeout: framework.DefaultDialTimeout,
		// What a careful application sets: a frozen member's
		// connection is found dead instead of waited on for ever, at
		// gRPC's floor for the ping interval (10 s) and 2 s for the
		// answer.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("sdk client for %s: %w", m.Name(), err)
	}
	locker, err := lock.NewLocker(lock.Config{Client: cli, Prefix: sdkPrefix, TTL: leaseTTL})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("sdk locker for %s: %w", m.Name(), err)
	}
	return &sdkContender{resource: string(APISDK) + "/" + resource, id: resource, node: name, client: cli, locker: locker}, nil
}

func (c *sdkContender) cycle(ctx context.Context, hist *History, rng *rand.Rand) {
	call := hist.StartCall(c.resource, c.node, APISDK, OpLock)
	lockCtx, cancel := context.WithTimeout(ctx, lockWait)
	l, err := c.locker.Lock(lockCtx, c.id, lock.WithOwner(c.node))
	cancel()
	if err != nil {
		hist.EndCall(call, err)
		pause(ctx, retryPause)
		return
	}
	d := holdTime(rng)
	hold := hist.Grant(call, l.FencingToken(), d)
	lost := work(hist, hold, d, l.Lost(), l.Err)
	// A lost lock is still unlocked: Unlock stops the renewals and
	// revokes the lease, and forgets the name in the Locker.
	c.unlock(ctx, hist, l, lost)
}

// unlock releases l, retrying after errors as the SDK asks (the handle
// still holds the lock, and its lease is still renewed, until Unlock
// succeeds or finds the lock lost), for at most unlockWait in all. Each
// attempt is a call of its own.
func (c *sdkContender) unlock(ctx context.Context, hist *History, l *lock.Lock, lost bool) {
	deadline := time.Now().Add(unlockWait)
	for {
		call := hist.StartCall(c.resource, c.node, APISDK, OpUnlock)
		attemptCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		err := l.Unlock(attemptCtx)
		cancel()
		if lost && errors.Is(err, lock.ErrOwnershipLost) {
			err = nil // the answer a lost lock is due
		}
		hist.EndCall(call, err)
		if err == nil || errors.Is(err, lock.ErrOwnershipLost) || errors.Is(err, lock.ErrLockNotHeld) || !time.Now().Before(deadline) {
			return
		}
		pause(context.WithoutCancel(ctx), retryPause)
	}
}

func (c *sdkContender) close() { c.client.Close() }
