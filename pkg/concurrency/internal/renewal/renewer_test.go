package renewal

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

func TestDeadlineArithmetic(t *testing.T) {
	s := time.Unix(100, 0)
	for _, tc := range []struct {
		ttl, delay, validity time.Duration
	}{
		{10 * time.Second, time.Second, 8800 * time.Millisecond}, // 10·0.98 − 1
		{5 * time.Second, time.Second, 3900 * time.Millisecond},  // 5·0.98 − 1
		{2 * time.Second, 500 * time.Millisecond, 1460 * time.Millisecond},
		{60 * time.Second, 0, 58800 * time.Millisecond},
	} {
		if got := Validity(tc.ttl, tc.delay); got != tc.validity {
			t.Errorf("Validity(%v, %v) = %v, want %v", tc.ttl, tc.delay, got, tc.validity)
		}
		if got := Deadline(s, tc.ttl, tc.delay); !got.Equal(s.Add(tc.validity)) {
			t.Errorf("Deadline(s, %v, %v) = s+%v, want s+%v", tc.ttl, tc.delay, got.Sub(s), tc.validity)
		}
	}
	for ttl, want := range map[time.Duration]time.Duration{
		2 * time.Second: 500 * time.Millisecond, 4 * time.Second: time.Second,
		10 * time.Second: time.Second, 60 * time.Second: time.Second,
	} {
		if got := DefaultLockDelay(ttl); got != want {
			t.Errorf("DefaultLockDelay(%v) = %v, want %v", ttl, got, want)
		}
		if err := CheckLockDelay(ttl, DefaultLockDelay(ttl)); err != nil {
			t.Errorf("the default delay of %v is refused: %v", ttl, err)
		}
	}
	if CheckLockDelay(2*time.Second, 1500*time.Millisecond) == nil || CheckLockDelay(time.Minute, -1) == nil {
		t.Error("a delay above half the TTL or below zero was accepted")
	}
	if _, err := Start(Config{TTL: 2 * time.Second, LockDelay: 2 * time.Second}); err == nil {
		t.Error("Start accepted a delay as long as the TTL")
	}
}

// start runs a Renewer of a 10 s lease with a 1 s delay granted at the
// fake clock's now; the loop has settled when it returns.
func start(t *testing.T) (*Renewer, *fakeClock, *fakeLeases, time.Time) {
	t.Helper()
	clk, leases := newFakeClock(), &fakeLeases{calls: make(chan call, 8)}
	t0 := clk.Now()
	r, err := Start(Config{Client: leases, Lease: 1, TTL: 10 * time.Second, Sent: t0, LockDelay: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	clk.waitTimers(t, 0)
	return r, clk, leases, t0
}

const validity = 8800 * time.Millisecond // of start's lease

// reply answers c and waits for the loop to take the answer in.
func reply(t *testing.T, clk *fakeClock, c call, rep callReply) {
	t.Helper()
	n := clk.timers()
	c.reply <- rep
	clk.waitTimers(t, n)
}

// TestDeadlineCountsFromSend: a renewal answered late moves the deadline
// to its send time plus the validity, not its receipt.
func TestDeadlineCountsFromSend(t *testing.T) {
	r, clk, leases, t0 := start(t)
	if !r.Deadline().Equal(t0.Add(validity)) {
		t.Fatalf("initial deadline t0+%v, want t0+%v", r.Deadline().Sub(t0), validity)
	}
	sent := clk.fireNext(t)
	if want := t0.Add(validity / 3); !sent.Equal(want) {
		t.Fatalf("first renewal at t0+%v, want a third of the validity, t0+%v", sent.Sub(t0), validity/3)
	}
	c := leases.expectCall(t)
	clk.advanceTo(sent.Add(1500 * time.Millisecond)) // the answer takes 1.5 s
	reply(t, clk, c, ttlReply(10))
	if got := r.Deadline(); !got.Equal(sent.Add(validity)) {
		t.Fatalf("deadline after a late answer = send+%v, want send+%v", got.Sub(sent), validity)
	}
	if r.Err() != nil {
		t.Fatalf("ended early: %v", r.Err())
	}
}

// TestDeadlineWhileRenewalHangs: renewals that never answer (a frozen
// member) are abandoned and retried, and the Renewer ends exactly at the
// deadline of the last confirmed renewal.
func TestDeadlineWhileRenewalHangs(t *testing.T) {
	r, clk, leases, t0 := start(t)
	deadline := t0.Add(validity)
	for {
		at := clk.next(t)
		if !at.Before(deadline) {
			break
		}
		n := clk.timers()
		clk.advanceTo(at)
		clk.waitTimers(t, n)
	}
	// Never answered: the first is cancelled on its timeout and retried.
	first, second := leases.expectCall(t), leases.expectCall(t)
	<-first.ctx.Done()
	_ = second
	clk.advanceTo(deadline.Add(-time.Nanosecond))
	if r.Err() != nil {
		t.Fatalf("ended before the deadline: %v", r.Err())
	}
	clk.advanceTo(deadline)
	<-r.Done()
	if !errors.Is(r.Err(), ErrDeadlinePassed) {
		t.Fatalf("Err = %v, want ErrDeadlinePassed", r.Err())
	}
}

// TestRetryAfterFailure: a failed renewal (no leader) is retried after
// RetryDelay, and the retry's success counts from its own send.
func TestRetryAfterFailure(t *testing.T) {
	r, clk, leases, _ := start(t)
	clk.fireNext(t)
	reply(t, clk, leases.expectCall(t), callReply{err: rpctypes.ErrNoLeader})
	failedAt := clk.Now()
	retry := clk.fireNext(t)
	if got := retry.Sub(failedAt); got != RetryDelay {
		t.Fatalf("retried %v after the failure, want %v", got, RetryDelay)
	}
	reply(t, clk, leases.expectCall(t), ttlReply(10))
	if got := r.Deadline(); !got.Equal(retry.Add(validity)) {
		t.Fatalf("deadline = retry+%v, want retry+%v", got.Sub(retry), validity)
	}
}

// TestLeaseGone: the server's "not found" (or a TTL of zero) ends the
// Renewer at once, and no renewal follows.
func TestLeaseGone(t *testing.T) {
	for name, rep := range map[string]callReply{
		"not found": {err: rpctypes.ErrLeaseNotFound},
		"ttl 0":     ttlReply(0),
	} {
		t.Run(name, func(t *testing.T) {
			r, clk, leases, _ := start(t)
			clk.fireNext(t)
			leases.expectCall(t).reply <- rep
			<-r.Done()
			if !errors.Is(r.Err(), ErrLeaseGone) {
				t.Fatalf("Err = %v, want ErrLeaseGone", r.Err())
			}
			if err := r.RenewOnce(t.Context()); !errors.Is(err, ErrLeaseGone) {
				t.Fatalf("RenewOnce after the end = %v, want the end's error", err)
			}
		})
	}
}

// TestManual: after Manual nothing renews in the background; RenewOnce
// moves the deadline from its send time; Stop is not a loss.
func TestManual(t *testing.T) {
	r, clk, leases, t0 := start(t)
	n := clk.timers()
	r.Manual()
	clk.waitTimers(t, n)
	// The only timer left is the deadline.
	if at := clk.next(t); !at.Equal(t0.Add(validity)) {
		t.Fatalf("next wake-up at t0+%v, want the deadline t0+%v", at.Sub(t0), validity)
	}
	clk.advanceTo(t0.Add(2 * time.Second))
	leases.noCall(t)
	sent := clk.Now()
	renewed := make(chan error, 1)
	go func() { renewed <- r.RenewOnce(t.Context()) }()
	leases.expectCall(t).reply <- ttlReply(10)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	if got := r.Deadline(); !got.Equal(sent.Add(validity)) {
		t.Fatalf("deadline after RenewOnce = send+%v, want send+%v", got.Sub(sent), validity)
	}
	r.Stop()
	if !errors.Is(r.Err(), ErrStopped) {
		t.Fatalf("Err after Stop = %v", r.Err())
	}
}

// TestRidesThroughLeaderChange: renewals failing for two seconds (no
// leader, then a leader that has not caught up) are retried every
// RetryDelay; the first success restores the deadline and the Renewer
// never ends.
func TestRidesThroughLeaderChange(t *testing.T) {
	r, clk, leases, t0 := start(t)
	clk.fireNext(t)
	failedFrom := clk.Now()
	for clk.Now().Sub(failedFrom) < 2*time.Second {
		reply(t, clk, leases.expectCall(t), callReply{err: rpctypes.ErrNoLeader})
		clk.fireNext(t)
	}
	sent := clk.Now()
	reply(t, clk, leases.expectCall(t), ttlReply(10))
	if r.Err() != nil {
		t.Fatalf("ended during the leader change: %v", r.Err())
	}
	if got := r.Deadline(); !got.Equal(sent.Add(validity)) || !got.After(t0.Add(validity)) {
		t.Fatalf("deadline after the leader change = send+%v, want send+%v", got.Sub(sent), validity)
	}
}
