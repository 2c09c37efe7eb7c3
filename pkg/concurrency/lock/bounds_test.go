package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/metastore-io/metastore/pkg/concurrency/internal/renewal"
)

// The request timeout of these tests, and the slack allowed on top of
// it for scheduling on a loaded machine.
const (
	testRequestTimeout = 500 * time.Millisecond
	boundSlack         = 2 * time.Second
	// testCallWait bounds each call under test by the caller's own
	// context, far beyond the bound, so that only the lock's own
	// request timeout can end it in time.
	testCallWait = 20 * time.Second
)

func newBoundedLocker(t *testing.T, m *fakeMember) *Locker {
	t.Helper()
	l, err := NewLocker(Config{Client: startFakeMember(t, m), Prefix: "/bounds/", RetryInterval: 50 * time.Millisecond,
		RequestTimeout: testRequestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestUnlockThroughFrozenMemberIsBounded: an Unlock whose member stops
// answering returns within the request timeout with a timeout error,
// and gives the handle up (renewal stopped), so the key goes when its
// lease expires instead of being renewed behind the caller's back.
func TestUnlockThroughFrozenMemberIsBounded(t *testing.T) {
	m := &fakeMember{ttl: 10}
	l := newBoundedLocker(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), testCallWait)
	defer cancel()
	h, err := l.Lock(ctx, "r")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	m.freeze()
	start := time.Now()
	err = h.Unlock(ctx)
	took := time.Since(start)
	if took > testRequestTimeout+boundSlack {
		t.Fatalf("Unlock through a frozen member took %v, want at most %v + %v", took, testRequestTimeout, boundSlack)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Unlock through a frozen member = %v, want a deadline-exceeded error", err)
	}
	if !errors.Is(h.renewer.Err(), renewal.ErrStopped) {
		t.Errorf("renewer after a timed-out Unlock: %v, want stopped", h.renewer.Err())
	}
	if err := h.Unlock(ctx); !errors.Is(err, ErrLockNotHeld) {
		t.Errorf("second Unlock = %v, want ErrLockNotHeld", err)
	}
	if l.holding("r") {
		t.Error("the Locker still records the name as held")
	}
}

// TestLockThroughFrozenMemberIsBounded: a Lock whose member answers
// nothing from the start fails within the request timeout.
func TestLockThroughFrozenMemberIsBounded(t *testing.T) {
	m := &fakeMember{ttl: 10}
	l := newBoundedLocker(t, m)
	m.freeze()
	ctx, cancel := context.WithTimeout(context.Background(), testCallWait)
	defer cancel()
	start := time.Now()
	_, err := l.Lock(ctx, "r")
	took := time.Since(start)
	if took > testRequestTimeout+boundSlack {
		t.Fatalf("Lock through a frozen member took %v, want at most %v + %v", took, testRequestTimeout, boundSlack)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock through a frozen member = %v, want a deadline-exceeded error", err)
	}
}

// TestRejoinThroughFrozenMemberIsBounded: a waiter queued behind a
// holder that never leaves, whose member then freezes, loses its place
// at its lease's holder deadline (no renewal is answered); its re-join
// cannot get through, and Lock fails within the request timeout of the
// loss instead of retrying silently.
func TestRejoinThroughFrozenMemberIsBounded(t *testing.T) {
	m := &fakeMember{ttl: 2, behind: true}
	l := newBoundedLocker(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), testCallWait)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := l.Lock(ctx, "r")
		done <- err
	}()
	select {
	case <-m.joined:
	case err := <-done:
		t.Fatalf("Lock ended before it queued: %v", err)
	}
	m.freeze()
	frozenAt := time.Now()
	// The place is lost at the holder deadline of the join's lease:
	// within TTL·(1 − 2ρ) − D of the grant, which came before the join.
	validity := renewal.Validity(2*time.Second, renewal.DefaultLockDelay(2*time.Second))
	err := <-done
	took := time.Since(frozenAt)
	if took > validity+testRequestTimeout+boundSlack {
		t.Fatalf("Lock whose waiter lost its place behind a frozen member took %v after the freeze, want at most %v + %v + %v",
			took, validity, testRequestTimeout, boundSlack)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock whose re-join could not get through = %v, want a deadline-exceeded error", err)
	}
}
