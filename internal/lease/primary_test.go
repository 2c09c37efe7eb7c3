package lease

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func ttlOf(t *testing.T, l *Lessor, id int64) int64 {
	t.Helper()
	resp, err := l.TimeToLive(id, false)
	if err != nil {
		t.Fatalf("TimeToLive(%x): %v", id, err)
	}
	return resp.TTL
}

// TestPromoteRestartsClocks: time spent as a follower does not count, and
// a new primary starts every lease at its full TTL plus the extension.
func TestPromoteRestartsClocks(t *testing.T) {
	l, clock, st := newTestLessor(t, Config{})
	mustGrant(t, l, st, 1, 10)
	if _, err := l.TimeToLive(1, false); !errors.Is(err, ErrNotPrimary) {
		t.Fatalf("TimeToLive on a follower: %v, want ErrNotPrimary", err)
	}
	clock.Advance(time.Hour)
	l.Promote(2 * time.Second)
	if got := ttlOf(t, l, 1); got != 12 {
		t.Fatalf("TTL after promote = %d, want 12 (10 + 2 s extension)", got)
	}
	clock.Advance(5 * time.Second)
	if got := ttlOf(t, l, 1); got != 7 {
		t.Fatalf("TTL 5 s later = %d, want 7", got)
	}

	// Demote stops the clock; the next promotion starts it afresh.
	l.Demote()
	if _, err := l.Renew(context.Background(), 1); !errors.Is(err, ErrNotPrimary) {
		t.Fatalf("Renew on a demoted lessor: %v, want ErrNotPrimary", err)
	}
	clock.Advance(time.Hour)
	l.Promote(time.Second)
	if got := ttlOf(t, l, 1); got != 11 {
		t.Fatalf("TTL after second promote = %d, want 11", got)
	}
}

// TestPromoteUsesCheckpointedTTL: a lease whose remaining TTL was
// checkpointed restarts from that remainder, so elections cannot keep a
// lease alive forever.
func TestPromoteUsesCheckpointedTTL(t *testing.T) {
	l, _, st := newTestLessor(t, Config{})
	mustGrant(t, l, st, 1, 600)
	l.ApplyCheckpoint(st, []*pb.LeaseCheckpoint{{ID: 1, Remaining_TTL: 42}})
	l.Promote(0)
	if got := ttlOf(t, l, 1); got != 42 {
		t.Fatalf("TTL after promote = %d, want the checkpointed 42", got)
	}
	// The granted TTL is still reported as granted.
	resp, _ := l.TimeToLive(1, false)
	if resp.GrantedTTL != 600 {
		t.Fatalf("GrantedTTL = %d, want 600", resp.GrantedTTL)
	}
}

func TestGrantOnPrimaryStartsClock(t *testing.T) {
	l, clock, st := newTestLessor(t, Config{})
	l.Promote(time.Second)
	mustGrant(t, l, st, 1, 30)
	clock.Advance(10 * time.Second)
	if got := ttlOf(t, l, 1); got != 20 {
		t.Fatalf("TTL = %d, want 20 (granted on the primary: no extension)", got)
	}
}

func TestRenew(t *testing.T) {
	p := newFakeProposer()
	l, clock, st := newTestLessor(t, Config{Proposer: p})
	mustGrant(t, l, st, 1, 10)
	l.Promote(0)
	clock.Advance(7 * time.Second)
	ttl, err := l.Renew(context.Background(), 1)
	if err != nil || ttl != 10 {
		t.Fatalf("Renew = %d, %v; want 10", ttl, err)
	}
	if got := ttlOf(t, l, 1); got != 10 {
		t.Fatalf("TTL after renew = %d, want 10", got)
	}
	if _, err := l.Renew(context.Background(), 2); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("Renew of unknown lease: %v", err)
	}
	if len(p.checkpoints) != 0 {
		t.Fatalf("renewing a lease without a checkpoint proposed %v", p.checkpoints)
	}
}

// TestRenewClearsCheckpoint: renewing a lease with a checkpointed
// remainder first clears it through Raft, so the renewal survives a
// leader change.
func TestRenewClearsCheckpoint(t *testing.T) {
	p := newFakeProposer()
	l, _, st := newTestLessor(t, Config{Proposer: p})
	p.onCP = func(cps []*pb.LeaseCheckpoint) error {
		l.ApplyCheckpoint(st, cps) // as the apply loop would
		return nil
	}
	mustGrant(t, l, st, 1, 600)
	l.ApplyCheckpoint(st, []*pb.LeaseCheckpoint{{ID: 1, Remaining_TTL: 5}})
	l.Promote(0)
	if ttl, err := l.Renew(context.Background(), 1); err != nil || ttl != 600 {
		t.Fatalf("Renew = %d, %v", ttl, err)
	}
	if want := [][]*pb.LeaseCheckpoint{{{ID: 1, Remaining_TTL: 0}}}; len(p.checkpoints) != 1 || p.checkpoints[0][0].String() != want[0][0].String() {
		t.Fatalf("proposed %v, want %v", p.checkpoints, want)
	}
	if got := ttlOf(t, l, 1); got != 600 {
		t.Fatalf("TTL after renew = %d, want the full 600", got)
	}
	// A failed clear fails the renewal.
	l.ApplyCheckpoint(st, []*pb.LeaseCheckpoint{{ID: 1, Remaining_TTL: 5}})
	p.onCP = func([]*pb.LeaseCheckpoint) error { return errors.New("no quorum") }
	if _, err := l.Renew(context.Background(), 1); err == nil {
		t.Fatal("Renew succeeded although the checkpoint clear failed")
	}
}

// TestRenewOfExpiredLease: an expired lease is being revoked; a renewal
// waits for the outcome instead of resurrecting it.
func TestRenewOfExpiredLease(t *testing.T) {
	for _, c := range []struct {
		name    string
		resolve func(l *Lessor, st *fakeStore)
		want    error
	}{
		{"revoked", func(l *Lessor, st *fakeStore) { _ = l.ApplyRevoke(st, 1) }, ErrLeaseNotFound},
		{"demoted", func(l *Lessor, _ *fakeStore) { l.Demote() }, ErrNotPrimary},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, clock, st := newTestLessor(t, Config{})
			mustGrant(t, l, st, 1, 5)
			l.Promote(0)
			clock.Advance(6 * time.Second)
			errc := make(chan error, 1)
			go func() {
				_, err := l.Renew(context.Background(), 1)
				errc <- err
			}()
			c.resolve(l, st)
			select {
			case err := <-errc:
				if !errors.Is(err, c.want) {
					t.Fatalf("Renew: %v, want %v", err, c.want)
				}
			case <-time.After(testDeadline):
				t.Fatal("Renew did not return")
			}
		})
	}
	t.Run("context", func(t *testing.T) {
		l, clock, st := newTestLessor(t, Config{})
		mustGrant(t, l, st, 1, 5)
		l.Promote(0)
		clock.Advance(6 * time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := l.Renew(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("Renew: %v, want context.Canceled", err)
		}
	})
}

func TestTimeToLiveKeysAndLeases(t *testing.T) {
	l, clock, st := newTestLessor(t, Config{})
	l.Promote(0)
	mustGrant(t, l, st, 3, 100)
	mustGrant(t, l, st, 1, 50)
	mustGrant(t, l, st, 2, 70)
	st.put(t, "b", 1)
	st.put(t, "a", 1)
	clock.Advance(1500 * time.Millisecond)
	resp, err := l.TimeToLive(1, true)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != 1 || resp.TTL != 48 || resp.GrantedTTL != 50 {
		t.Fatalf("TimeToLive = %+v, want ID 1 TTL 48 (48.5 truncated) granted 50", resp)
	}
	if got := []string{string(resp.Keys[0]), string(resp.Keys[1])}; !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("keys %q", got)
	}
	if resp, _ := l.TimeToLive(1, false); resp.Keys != nil {
		t.Fatal("keys returned without being asked for")
	}
	if _, err := l.TimeToLive(9, false); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("TimeToLive of unknown lease: %v", err)
	}
	if got := l.Leases(); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("Leases() = %v, want expiry order [1 2 3]", got)
	}
}

// TestPromoteSpreadsPiledUpExpiries: with more leases than a second of
// revokes expiring together, promotion spreads them to 3/4 of the rate.
func TestPromoteSpreadsPiledUpExpiries(t *testing.T) {
	const rate = 100
	l, _, st := newTestLessor(t, Config{RevokeRate: rate})
	for id := int64(1); id <= 400; id++ {
		mustGrant(t, l, st, id, 10)
	}
	l.Promote(time.Second)
	now := l.now()
	perSecond := map[int64]int{}
	l.mu.RLock()
	for _, ls := range l.leases {
		if ls.expiry < now+11*time.Second {
			t.Fatalf("lease %d expires in %v, before its TTL plus extension", ls.id, ls.expiry-now)
		}
		perSecond[int64((ls.expiry-now)/time.Second)]++
	}
	l.mu.RUnlock()
	for s, n := range perSecond {
		if n > 3*rate/4+1 {
			t.Errorf("%d leases expire in second %d, want at most %d", n, s, 3*rate/4+1)
		}
	}
	if len(perSecond) < 400/(3*rate/4) {
		t.Errorf("expiries spread over %d seconds only", len(perSecond))
	}
}

// TestElectionDoesNotRenewForever: checkpoints taken by one leader are what
// the next leader starts from.
func TestElectionDoesNotRenewForever(t *testing.T) {
	p := newFakeProposer()
	cfg := Config{Proposer: p, CheckpointInterval: time.Minute}
	leader, clock, st := newTestLessor(t, cfg)
	follower, err := New(Config{Clock: clock, Proposer: p, CheckpointInterval: time.Minute, Logger: leader.log})
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.Recover(st); err != nil {
		t.Fatal(err)
	}
	p.onCP = func(cps []*pb.LeaseCheckpoint) error { // the entry applies on both members
		leader.ApplyCheckpoint(st, cps)
		follower.ApplyCheckpoint(newFakeStore(), cps)
		return nil
	}
	leader.Promote(0)
	mustGrant(t, leader, st, 1, 300)
	mustGrant(t, follower, newFakeStore(), 1, 300)
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	p.waitFor(t, "a checkpoint", func(p *fakeProposer) bool { return len(p.checkpoints) > 0 })
	if got := p.checkpoints[0]; len(got) != 1 || got[0].ID != 1 || got[0].Remaining_TTL != 240 {
		t.Fatalf("checkpoint %v, want lease 1 with 240 s left", got)
	}

	// Leadership moves: the new leader starts lease 1 from 240 s, not 300.
	leader.Demote()
	follower.Promote(time.Second)
	if got := ttlOf(t, follower, 1); got != 241 {
		t.Fatalf("TTL on the new leader = %d, want 241", got)
	}
}
