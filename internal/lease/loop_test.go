package lease

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// startPrimary returns a started, promoted lessor whose revokes are
// proposed to p.
func startPrimary(t *testing.T, cfg Config, p *fakeProposer) (*Lessor, *fakeClock, *fakeStore) {
	t.Helper()
	cfg.Proposer = p
	l, clock, st := newTestLessor(t, cfg)
	l.Promote(0)
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	return l, clock, st
}

func TestExpiredLeaseIsRevokedThroughRaft(t *testing.T) {
	p := newFakeProposer()
	l, clock, st := startPrimary(t, Config{}, p)
	p.onRevoke = func(id int64) error { return nil } // proposals only; nothing applies
	mustGrant(t, l, st, 1, 5)
	mustGrant(t, l, st, 2, 10)

	start := clock.Now()
	clock.waitTimer(t, start.Add(5*time.Second)) // the loop sleeps until lease 1 expires
	clock.Advance(5 * time.Second)
	p.waitFor(t, "revoke of lease 1", func(p *fakeProposer) bool { return len(p.revokes) == 1 })
	// The loop then sleeps until lease 1's revoke is due for a retry
	// (ExpiredRetryInterval, 3 s), which comes before lease 2 expires.
	clock.waitTimer(t, start.Add(8*time.Second))
	if got := p.revoked(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("revoked %v, want [1]", got)
	}
	if !l.LeaseExists(1) {
		t.Fatal("the loop changed the table itself; only an applied revoke may")
	}
}

// TestExpiredRevokeIsRetried: if the revoke proposal does not apply, the
// lease is handed out again after ExpiredRetryInterval, and once it
// applies the lease is gone from the heap.
func TestExpiredRevokeIsRetried(t *testing.T) {
	p := newFakeProposer()
	l, clock, st := startPrimary(t, Config{ExpiredRetryInterval: 3 * time.Second}, p)
	var attempts atomic.Int32
	applied := make(chan error, 1)
	p.onRevoke = func(id int64) error {
		if attempts.Add(1) == 1 {
			return errors.New("leader changed")
		}
		err := l.ApplyRevoke(st, id)
		applied <- err
		return err
	}
	mustGrant(t, l, st, 1, 5)
	start := clock.Now()
	clock.waitTimer(t, start.Add(5*time.Second))
	clock.Advance(5 * time.Second)
	p.waitFor(t, "first revoke", func(p *fakeProposer) bool { return len(p.revokes) == 1 })
	clock.waitTimer(t, start.Add(8*time.Second))
	clock.Advance(3 * time.Second)
	select {
	case err := <-applied:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testDeadline):
		t.Fatal("revoke was not retried")
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if _, ok := l.leases[1]; ok || l.expiry.Len() != 0 {
		t.Fatalf("after the applied revoke: lease present %v, heap size %d", ok, l.expiry.Len())
	}
}

// TestRevokeRateLimit: 2,000 leases expiring at once with a rate of 1,000
// per second are handed to revokes 500 per 500 ms window.
func TestRevokeRateLimit(t *testing.T) {
	p := newFakeProposer()
	l, clock, st := startPrimary(t, Config{RevokeRate: 1000}, p)
	for id := int64(1); id <= 2000; id++ {
		mustGrant(t, l, st, id, 5)
	}
	start := clock.Now()
	clock.waitTimer(t, start.Add(5*time.Second))
	for window := 1; window <= 4; window++ {
		// The workers propose everything handed out so far before time
		// moves on, so the rate limit, not the queue's room, is what binds.
		p.waitFor(t, "handed revokes", func(p *fakeProposer) bool { return int64(len(p.revokes)) >= l.queued.Load() })
		clock.Advance(map[bool]time.Duration{true: 5 * time.Second, false: rateWindow}[window == 1])
		// After its tick the loop sleeps until the next window opens, or
		// once all are handed out, until the first retry is due.
		wake := clock.Now().Add(rateWindow)
		if window == 4 {
			wake = start.Add(5*time.Second + defaultExpiredRetryInterval)
		}
		clock.waitTimer(t, wake)
		if got, want := l.queued.Load(), int64(500*window); got != want {
			t.Fatalf("window %d: %d leases handed to revokes, want %d", window, got, want)
		}
	}
	p.waitFor(t, "all revokes", func(p *fakeProposer) bool { return len(p.revokes) == 2000 })
	got := p.revoked()
	slices.Sort(got)
	if got[0] != 1 || got[1999] != 2000 || len(slices.Compact(got)) != 2000 {
		t.Fatal("not every lease was revoked exactly once")
	}
}

// TestNoRevokeWithoutConfirmedLeadership: a leader that cannot confirm it
// still leads does not revoke.
func TestNoRevokeWithoutConfirmedLeadership(t *testing.T) {
	p := newFakeProposer()
	p.notLeader = true
	l, clock, st := startPrimary(t, Config{ExpiredRetryInterval: 3 * time.Second}, p)
	mustGrant(t, l, st, 1, 5)
	start := clock.Now()
	clock.waitTimer(t, start.Add(5*time.Second))
	clock.Advance(5 * time.Second)
	// The loop found lease 1 expired, could not confirm, and will look
	// again after the retry interval.
	clock.waitTimer(t, start.Add(8*time.Second))
	if l.queued.Load() != 0 || len(p.revoked()) != 0 {
		t.Fatal("revoked without confirmed leadership")
	}
	p.mu.Lock()
	p.notLeader = false
	p.mu.Unlock()
	clock.Advance(3 * time.Second)
	p.waitFor(t, "revoke once leadership is confirmed", func(p *fakeProposer) bool { return len(p.revokes) == 1 })
}

// TestFollowerTimeDoesNotCount: leases do not expire while demoted, and
// promotion restarts their clocks.
func TestFollowerTimeDoesNotCount(t *testing.T) {
	p := newFakeProposer()
	l, clock, st := startPrimary(t, Config{}, p)
	mustGrant(t, l, st, 1, 5)
	mustGrant(t, l, st, 2, 10)
	start := clock.Now()
	clock.waitTimer(t, start.Add(5*time.Second))
	clock.Advance(5 * time.Second)
	p.waitFor(t, "revoke of lease 1", func(p *fakeProposer) bool { return len(p.revokes) == 1 })

	l.Demote()
	clock.Advance(time.Hour)
	l.Promote(time.Second)
	// Every clock restarts: lease 1 (expired, but its revoke never applied)
	// at 5 s + 1 s, lease 2 at 10 s + 1 s. The loop sleeps until lease 1's
	// new expiry, having revoked nothing meanwhile.
	clock.waitTimer(t, clock.Now().Add(6*time.Second))
	if got := p.revoked(); !slices.Equal(got, []int64{1}) {
		t.Fatalf("revoked %v after a demoted hour, want only [1]", got)
	}
	if got := ttlOf(t, l, 2); got != 11 {
		t.Fatalf("lease 2 TTL = %d, want 11", got)
	}
}

func TestCheckpointsAreScheduledAndRateLimited(t *testing.T) {
	p := newFakeProposer()
	l, clock, st := startPrimary(t, Config{CheckpointInterval: time.Minute, CheckpointRate: 2}, p)
	for id := int64(1); id <= 2500; id++ {
		mustGrant(t, l, st, id, 600)
	}
	mustGrant(t, l, st, 9999, 30) // shorter than the interval: never checkpointed
	start := clock.Now()
	clock.waitTimer(t, start.Add(30*time.Second))
	clock.Advance(time.Minute)
	// CheckpointRate 2/s allows one entry (of up to 1,000) per window.
	p.waitFor(t, "first checkpoint entry", func(p *fakeProposer) bool { return len(p.checkpoints) == 1 })
	clock.waitTimer(t, clock.Now().Add(rateWindow))
	if n := len(p.checkpoints); n != 1 {
		t.Fatalf("%d checkpoint entries in one window, want 1", n)
	}
	clock.Advance(rateWindow)
	p.waitFor(t, "second entry", func(p *fakeProposer) bool { return len(p.checkpoints) == 2 })
	clock.waitTimer(t, clock.Now().Add(rateWindow))
	clock.Advance(rateWindow)
	p.waitFor(t, "third entry", func(p *fakeProposer) bool { return len(p.checkpoints) == 3 })

	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[int64]bool{}
	for i, batch := range p.checkpoints {
		if want := []int{1000, 1000, 500}[i]; len(batch) != want {
			t.Fatalf("entry %d holds %d checkpoints, want %d", i, len(batch), want)
		}
		// Entry i is proposed i windows after the first: remaining TTLs are
		// rounded up as etcd does (539.5 s -> 540, 539 s -> 539).
		remaining := []int64{540, 540, 539}[i]
		for _, cp := range batch {
			if cp.ID == 9999 || seen[cp.ID] || cp.Remaining_TTL != remaining {
				t.Fatalf("unexpected checkpoint %v", cp)
			}
			seen[cp.ID] = true
		}
	}
}
