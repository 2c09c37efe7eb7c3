package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/internal/cluster/forward"
	"github.com/metastore-io/metastore/internal/lease"
)

// Keep-alives arriving at a follower together share forwarded batches, and
// each gets its own lease's answer from the leader.
func TestFollowerBatchesKeepAlives(t *testing.T) {
	ms := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	follower := testMembersExcept(ms, leaderOf(t, ms))[0]

	ttls := []int64{10, 20, 30, 40}
	var ids []int64
	for _, ttl := range ttls {
		g, err := follower.srv.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	unknown := ids[len(ids)-1] + 1000

	before := follower.srv.renewals.Batches()
	const rounds = 50
	var wg sync.WaitGroup
	errs := make(chan error, rounds*(len(ids)+1))
	for range rounds {
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if ttl, err := follower.srv.LeaseRenew(ctx, id); err != nil || ttl != ttls[i] {
					errs <- errors.Join(errors.New("renew: wrong answer"), err)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := follower.srv.LeaseRenew(ctx, unknown); !errors.Is(err, lease.ErrLeaseNotFound) {
				errs <- errors.Join(errors.New("renew of an unknown lease: want ErrLeaseNotFound"), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sent := follower.srv.renewals.Batches() - before
	if total := uint64(rounds * (len(ids) + 1)); sent == 0 || sent > total {
		t.Fatalf("%d keep-alives went in %d batches", total, sent)
	}
	t.Logf("%d keep-alives in %d forwarded batches", rounds*(len(ids)+1), sent)
}

// TestKeepAliveToLeaderOfEarlierBuild: a leader of an earlier build
// answers the batch method Unimplemented (it has no handler for it); the
// follower falls back to forwarding each keep-alive alone, so leases keep
// living through a rolling upgrade.
func TestKeepAliveToLeaderOfEarlierBuild(t *testing.T) {
	ms := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	leader := leaderOf(t, ms)
	follower := testMembersExcept(ms, leader)[0]
	var refused atomic.Int64
	if err := leader.srv.transport.RegisterForwardHandler(forward.MethodLeaseRenewBatch, func(context.Context, []byte) ([]byte, error) {
		refused.Add(1)
		return nil, status.Errorf(codes.Unimplemented, "no forward handler for method %q", forward.MethodLeaseRenewBatch)
	}); err != nil {
		t.Fatal(err)
	}
	g, err := follower.srv.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 30})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ttl, err := follower.srv.LeaseRenew(ctx, g.ID); err != nil || ttl != 30 {
				t.Errorf("keep-alive through a leader without batches: ttl %d, %v; want 30", ttl, err)
			}
		}()
	}
	wg.Wait()
	if _, err := follower.srv.LeaseRenew(ctx, g.ID+1000); !errors.Is(err, lease.ErrLeaseNotFound) {
		t.Errorf("keep-alive of an unknown lease through a leader without batches: %v, want ErrLeaseNotFound", err)
	}
	if refused.Load() == 0 {
		t.Fatal("the follower never tried the batch method: the test did not exercise the fallback")
	}
}

// startRenewCluster starts three members and returns a context ending
// with the test (testTimeout at most), the leader and the two followers.
func startRenewCluster(t *testing.T) (context.Context, *testMember, []*testMember) {
	t.Helper()
	ms := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	leader := leaderOf(t, ms)
	return ctx, leader, testMembersExcept(ms, leader)
}

func grantLease(ctx context.Context, t *testing.T, m *testMember, ttl int64) *pb.LeaseGrantResponse {
	t.Helper()
	g, err := m.srv.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: ttl})
	if err != nil {
		t.Fatalf("grant a lease on %s: %v", m.name, err)
	}
	return g
}

// hangBatches makes m a member that takes forwarded keep-alive batches
// and never answers them (a frozen or cut-off leader), until the test
// ends. entered receives one value per batch it takes.
func hangBatches(t *testing.T, m *testMember) (entered <-chan struct{}) {
	t.Helper()
	in := make(chan struct{}, 64)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	if err := m.srv.transport.RegisterForwardHandler(forward.MethodLeaseRenewBatch, func(context.Context, []byte) ([]byte, error) {
		select {
		case in <- struct{}{}:
		default:
		}
		<-release
		return nil, errors.New("released at the end of the test")
	}); err != nil {
		t.Fatal(err)
	}
	return in
}

// renewResult is what one renew call returned, and when.
type renewResult struct {
	ttl int64
	err error
	at  time.Time
}

func renewAsync(ctx context.Context, b *forward.RenewBatcher, leader uint64, id int64) <-chan renewResult {
	ch := make(chan renewResult, 1)
	go func() {
		ttl, err := b.Renew(ctx, leader, id)
		ch <- renewResult{ttl, err, time.Now()}
	}()
	return ch
}

// A batch stuck on a member that never answers neither delays keep-alives
// to the new leader nor keeps its own keep-alives waiting once raft
// reports that leader: they are answered at once with the retryable
// ErrNotPrimary, and the new leader's batch goes while the stuck one is
// still on its way. The batcher here has an hour's call timeout, so only
// the retarget can end the stuck batch.
func TestRenewBatcherRetargetsPastStuckMember(t *testing.T) {
	ctx, leader, followers := startRenewCluster(t)
	from, stuck := followers[0], followers[1]
	entered := hangBatches(t, stuck)
	g := grantLease(ctx, t, from, 30)
	b := forward.NewRenewBatcher(from.srv.transport, from.srv.users.spawn, time.Hour, from.srv.stopping)

	// The batcher believes the stuck member leads: keep-alives go there
	// and wait, the first in a batch on its way, the others behind it.
	b.Retarget(stuck.srv.id)
	first := renewAsync(ctx, b, stuck.srv.id, g.ID)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the keep-alive never reached the stuck member")
	}
	queued := renewAsync(ctx, b, stuck.srv.id, g.ID)

	// Raft reports the real leader: both are answered at once, retryably.
	changedAt := time.Now()
	b.Retarget(leader.srv.id)
	for _, ch := range []<-chan renewResult{first, queued} {
		select {
		case r := <-ch:
			if !errors.Is(r.err, lease.ErrNotPrimary) {
				t.Fatalf("keep-alive to the member that stopped leading: ttl %d, %v; want ErrNotPrimary", r.ttl, r.err)
			}
			// Retargeting is a few channel closes; 1 s is for a loaded
			// 2-core machine under -race, still far below any timeout.
			if d := r.at.Sub(changedAt); d > time.Second {
				t.Fatalf("keep-alive to the member that stopped leading answered %v after the leader change", d)
			}
		case <-ctx.Done():
			t.Fatal("a keep-alive to the member that stopped leading was never answered")
		}
	}
	// A keep-alive for a member that no longer leads is refused at once.
	if _, err := b.Renew(ctx, stuck.srv.id, g.ID); !errors.Is(err, lease.ErrNotPrimary) {
		t.Fatalf("keep-alive to a member that does not lead: %v, want ErrNotPrimary", err)
	}
	// The new leader renews, whatever the stuck member still holds.
	if ttl, err := b.Renew(ctx, leader.srv.id, g.ID); err != nil || ttl != 30 {
		t.Fatalf("keep-alive to the new leader: ttl %d, %v; want 30", ttl, err)
	}
}

// A batch is bounded by the call timeout, far below the request timeout:
// a leader that never answers gets the keep-alive's caller a retryable
// error within it, not after the request timeout.
func TestRenewBatchBoundedByCallTimeout(t *testing.T) {
	ctx, leader, followers := startRenewCluster(t)
	from := followers[0]
	hangBatches(t, leader)
	const callTimeout = 200 * time.Millisecond
	b := forward.NewRenewBatcher(from.srv.transport, from.srv.users.spawn, callTimeout, from.srv.stopping)
	b.Retarget(leader.srv.id)
	start := time.Now()
	_, err := b.Renew(ctx, leader.srv.id, 1)
	took := time.Since(start)
	if !errors.Is(err, lease.ErrNotPrimary) {
		t.Fatalf("keep-alive to a leader that never answers: %v, want the retryable ErrNotPrimary", err)
	}
	// The margin (2 s over 200 ms) is for a loaded machine; the request
	// timeout is over 5 s.
	if took > callTimeout+2*time.Second || took >= from.srv.reqTimeout {
		t.Fatalf("keep-alive to a leader that never answers took %v; want about the call timeout %v", took, callTimeout)
	}
}

// Through the member's own path (LeaseRenew): a keep-alive whose batch is
// stuck on a leader that never answers is answered by the next leader as
// soon as leadership moves, not after the request timeout.
func TestKeepAliveReachesNewLeaderPastStuckBatch(t *testing.T) {
	ctx, leader, followers := startRenewCluster(t)
	from, next := followers[0], followers[1]
	g := grantLease(ctx, t, from, 30)
	entered := hangBatches(t, leader)
	done := make(chan renewResult, 1)
	go func() {
		ttl, err := from.srv.LeaseRenew(ctx, g.ID)
		done <- renewResult{ttl, err, time.Now()}
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the keep-alive never reached the leader")
	}
	if err := leader.srv.MoveLeader(ctx, next.srv.id); err != nil {
		t.Fatalf("move leadership to %s: %v", next.name, err)
	}
	movedAt := time.Now()
	r := <-done
	if r.err != nil || r.ttl != 30 {
		t.Fatalf("keep-alive stuck on the old leader: ttl %d, %v; want 30 from the next leader", r.ttl, r.err)
	}
	// The next leader answers within a few election timeouts (100 ms
	// here) of taking over; 2 s is for a loaded machine under -race and
	// still far below the request timeout (over 5 s), after which the
	// keep-alive would fail.
	if d := r.at.Sub(movedAt); d > 2*time.Second {
		t.Fatalf("keep-alive answered %v after leadership moved", d)
	}
	t.Logf("keep-alive answered %v after MoveLeader returned", r.at.Sub(movedAt).Round(time.Millisecond))
}
