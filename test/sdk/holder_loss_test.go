package sdk

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/metastore-io/metastore/test/framework"
)

// The timing of the holder-loss scenarios (docs/coordination-safety.md).
// With a 5 s lease the SDK's default lock delay D is 1 s, so a holder's
// deadline is s + 5·0.98 − 1 = s + 3.9 s after the send s of its last
// confirmed renewal, while the leader cannot expire the lease before
// s + 4.95 s: the holder stops believing at least 1.05 s before anybody
// else can be granted.
const (
	lossTTL      = 5 // seconds
	lossValidity = 3900 * time.Millisecond
	// lossMargin is what the tests require between the holder's loss
	// signal and the next grant, both read on this process's clock. The
	// model promises 1.05 s; half a second is left for the holder's timer
	// firing late on a loaded machine.
	lossMargin = 500 * time.Millisecond
	// lossSlack is how late after its deadline a holder's loss signal may
	// be observed: a timer firing late and a goroutine scheduled late.
	lossSlack = 400 * time.Millisecond
)

// TestHolderLearnsOfLossFirst: for every SDK lock API, a holder whose
// client talks only to member X is told it lost the lock before a waiter
// on another member is granted it, when X is frozen (SIGSTOP) and when X
// is cut off from its peers; when quorum is lost the holder is told by
// its deadline and nobody else is granted.
func TestHolderLearnsOfLossFirst(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{Size: 3, PeerProxies: true}, func(t *testing.T, e *env) {
		t.Run("FrozenMember", func(t *testing.T) {
			holderLossScenario(t, e, func(x, _, _ *framework.Member) func() {
				if err := x.Pause(); err != nil {
					t.Fatal(err)
				}
				return func() { _ = x.Resume() }
			})
		})
		t.Run("CutMember", func(t *testing.T) {
			holderLossScenario(t, e, func(x, _, _ *framework.Member) func() {
				e.cluster.Network().Isolate(x.Name())
				return func() { e.cluster.Network().Heal(x.Name()) }
			})
		})
		t.Run("QuorumLost", func(t *testing.T) { testQuorumLost(t, e) })
	})
}

// holderLossScenario takes every API's lock through a client of follower
// X, queues a waiter for each through a client of another follower Y,
// applies fault (which returns its undo), and requires each holder's
// loss signal at least lossMargin before its waiter's grant.
func holderLossScenario(t *testing.T, e *env, fault func(x, y, leader *framework.Member) func()) {
	ctx := testContext(t, 2*scenarioTimeout)
	x, y, leader := roles(ctx, t, e)
	holders, waiters := startContenders(ctx, t, e, x, y)
	undo := fault(x, y, leader)
	t.Cleanup(undo)
	for _, c := range holders {
		c.awaitLoss(ctx, t)
	}
	for _, w := range waiters {
		w.awaitGrant(ctx, t)
	}
	undo()
	for i, h := range holders {
		w := waiters[i]
		t.Logf("%s: loss %v before the grant", h.api, w.granted.Sub(h.lost).Round(time.Millisecond))
		if h.lost.After(w.granted.Add(-lossMargin)) {
			t.Errorf("%s: the holder was told %v after the waiter was granted (want at least %v before)",
				h.api, h.lost.Sub(w.granted).Round(time.Millisecond), lossMargin)
		}
	}
	awaitHealthy(ctx, t, e)
}

// testQuorumLost: X is cut off from its peers and one of them is frozen,
// so no member has a quorum. The holder on X must be told by its deadline
// (the send of its last confirmed renewal plus lossValidity) and the
// waiter on the third member must not be granted.
func testQuorumLost(t *testing.T, e *env) {
	ctx := testContext(t, 2*scenarioTimeout)
	x, y, leader := roles(ctx, t, e)
	holders, waiters := startContenders(ctx, t, e, x, y)
	if err := leader.Pause(); err != nil {
		t.Fatal(err)
	}
	e.cluster.Network().Isolate(x.Name())
	undo := func() { _ = leader.Resume(); e.cluster.Network().Heal(x.Name()) }
	t.Cleanup(undo)
	for _, h := range holders {
		h.awaitLoss(ctx, t)
	}
	for _, h := range holders {
		deadline := h.rec.lastConfirmed().Add(lossValidity)
		t.Logf("%s: told %v after its deadline", h.api, h.lost.Sub(deadline).Round(time.Millisecond))
		if h.lost.After(deadline.Add(lossSlack)) {
			t.Errorf("%s: the holder was told %v after its deadline (want within %v)",
				h.api, h.lost.Sub(deadline).Round(time.Millisecond), lossSlack)
		}
	}
	for _, w := range waiters {
		if w.wasGranted() {
			t.Errorf("%s: a waiter was granted the lock while no member had a quorum", w.api)
		}
	}
	undo()
	awaitHealthy(ctx, t, e)
}

// roles picks X and Y, two followers, and the leader.
func roles(ctx context.Context, t *testing.T, e *env) (x, y, leader *framework.Member) {
	t.Helper()
	fs := followers(ctx, t, e)
	for _, m := range e.cluster.Members() {
		if m != fs[0] && m != fs[1] {
			leader = m
		}
	}
	return fs[0], fs[1], leader
}

// startContenders takes every API's lock through its own client of x,
// then queues a waiter for each through a client of y, and returns once
// every waiter's key is in the queue.
func startContenders(ctx context.Context, t *testing.T, e *env, x, y *framework.Member) ([]*holder, []*waiter) {
	t.Helper()
	var holders []*holder
	var waiters []*waiter
	for _, api := range lockAPIs() {
		pfx := keyPrefix(t) + "/" + api.name
		rec := &renewalRecorder{}
		h := &holder{api: api.name, rec: rec, lostc: make(chan struct{})}
		lost, release, err := api.hold(ctx, recordedClient(t, x, rec), pfx)
		if err != nil {
			t.Fatalf("%s: hold: %v", api.name, err)
		}
		t.Cleanup(release)
		go func() {
			<-lost
			h.lost = time.Now()
			close(h.lostc)
		}()
		w := &waiter{api: api.name, grantc: make(chan struct{})}
		t.Cleanup(func() {
			if w.wasGranted() {
				w.release()
			}
		})
		cliY := y.NewClient(t)
		go func() {
			w.release, w.err = api.wait(ctx, cliY, pfx)
			w.granted = time.Now()
			close(w.grantc)
		}()
		if err := waitForKeys(ctx, cliY, api.queue(pfx), 2); err != nil {
			t.Fatalf("%s: %v", api.name, err)
		}
		holders, waiters = append(holders, h), append(waiters, w)
	}
	return holders, waiters
}

// holder is one API's lock holder and when it was told of its loss.
type holder struct {
	api   string
	rec   *renewalRecorder
	lost  time.Time // set before lostc is closed
	lostc chan struct{}
}

func (h *holder) awaitLoss(ctx context.Context, t *testing.T) {
	t.Helper()
	select {
	case <-h.lostc:
	case <-ctx.Done():
		t.Fatalf("%s: the holder was never told it lost the lock", h.api)
	}
}

// waiter is one API's waiter and when it was granted the lock.
type waiter struct {
	api     string
	granted time.Time // set with err and release before grantc is closed
	err     error
	release func()
	grantc  chan struct{}
}

func (w *waiter) awaitGrant(ctx context.Context, t *testing.T) {
	t.Helper()
	select {
	case <-w.grantc:
		if w.err != nil {
			t.Fatalf("%s: the waiter's lock: %v", w.api, w.err)
		}
	case <-ctx.Done():
		t.Fatalf("%s: the waiter was never granted the lock", w.api)
	}
}

func (w *waiter) wasGranted() bool {
	select {
	case <-w.grantc:
		return w.err == nil
	default:
		return false
	}
}

// awaitHealthy waits until every member serves a linearizable read.
func awaitHealthy(ctx context.Context, t *testing.T, e *env) {
	t.Helper()
	for _, m := range e.cluster.Members() {
		cli := m.NewClient(t)
		for {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Get(rctx, "/health-probe")
			cancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("member %s never served a read again: %v", m.Name(), err)
			case <-time.After(100 * time.Millisecond): // retry pace
			}
		}
	}
}

// renewalRecorder watches a client's lease grants and keep-alive streams
// and keeps the send time of the last grant or keep-alive the server
// answered with a TTL above zero: the s of the safety model, whatever the
// SDK itself records.
type renewalRecorder struct {
	mu   sync.Mutex
	last time.Time
}

func (r *renewalRecorder) lastConfirmed() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func (r *renewalRecorder) confirm(sent time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sent.After(r.last) {
		r.last = sent
	}
}

func (r *renewalRecorder) interceptGrant(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	sent := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if resp, ok := reply.(*pb.LeaseGrantResponse); ok && err == nil && resp.TTL > 0 {
		r.confirm(sent)
	}
	return err
}

func (r *renewalRecorder) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
		return cs, err
	}
	return &recordedStream{ClientStream: cs, r: r}, nil
}

// recordedStream pairs each keep-alive response with the send time of the
// request it answers: a stream answers its requests in order.
type recordedStream struct {
	grpc.ClientStream
	r    *renewalRecorder
	mu   sync.Mutex
	sent []time.Time
}

func (s *recordedStream) SendMsg(m any) error {
	s.mu.Lock()
	s.sent = append(s.sent, time.Now()) // before sending: the answer may overtake an append after
	s.mu.Unlock()
	err := s.ClientStream.SendMsg(m)
	if err != nil {
		s.mu.Lock()
		s.sent = s.sent[:len(s.sent)-1]
		s.mu.Unlock()
	}
	return err
}

func (s *recordedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	resp, ok := m.(*pb.LeaseKeepAliveResponse)
	if err != nil || !ok {
		return err
	}
	s.mu.Lock()
	var sent time.Time
	if len(s.sent) > 0 {
		sent, s.sent = s.sent[0], s.sent[1:]
	}
	s.mu.Unlock()
	if resp.TTL > 0 && !sent.IsZero() {
		s.r.confirm(sent)
	}
	return nil
}

// recordedClient is a client of m alone whose keep-alives rec watches.
func recordedClient(t *testing.T, m *framework.Member, rec *renewalRecorder) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{m.Endpoint()},
		DialTimeout: framework.DefaultDialTimeout,
		DialOptions: []grpc.DialOption{
			grpc.WithChainStreamInterceptor(rec.intercept),
			grpc.WithChainUnaryInterceptor(rec.interceptGrant),
		},
		Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("client of %s: %v", m.Name(), err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
