package raftnode

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/testutil"
)

// waitFor polls a condition on internal state that has no event of its
// own, bounded by the test deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, testTimeout, what, cond)
}

// campaign makes a member that never ticks stand for election, once raft
// has applied the bootstrap configuration (before that it refuses).
func campaign(t *testing.T, n *Node) {
	t.Helper()
	waitFor(t, "raft to apply the bootstrap configuration", func() bool { return n.raft.Status().Applied >= 1 })
	if err := n.raft.Campaign(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

func TestLinearizableReadWaitsForApply(t *testing.T) {
	sm := newFakeSM()
	entered := make(chan uint64, 1)
	release := make(chan struct{})
	sm.beforeApply = func(e raftpb.Entry) {
		if string(e.Data) == "slow" {
			entered <- e.Index
			<-release
		}
	}
	n := mustStart(t, testConfig(t, t.TempDir()), sm)
	waitLeader(t, n)
	ctx := testContext(t)
	if err := n.Propose(ctx, []byte("slow")); err != nil {
		t.Fatal(err)
	}
	var slowIndex uint64
	select {
	case slowIndex = <-entered:
	case <-ctx.Done():
		t.Fatal("apply of the slow entry never started")
	}

	type result struct {
		err     error
		applied uint64
	}
	done := make(chan result, 1)
	go func() {
		err := n.LinearizableRead(ctx)
		done <- result{err, sm.AppliedIndex()}
	}()
	// The round is confirmed (commit index >= slowIndex) and now waits for
	// the apply loop, which is stuck in the slow entry.
	waitFor(t, "read round waiting for apply", func() bool { return n.appliedWaits.pending() == 1 })
	select {
	case r := <-done:
		t.Fatalf("LinearizableRead returned (%v) while entry %d was still being applied", r.err, slowIndex)
	default:
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.applied < slowIndex {
		t.Fatalf("read returned at applied index %d, below the committed %d", r.applied, slowIndex)
	}
}

func TestLinearizableReadBatchesConcurrentCalls(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	// No ticks: nobody campaigns until the test says so.
	cfg.TickInterval = time.Hour
	sm := newFakeSM()
	n := mustStart(t, cfg, sm)
	ctx := testContext(t)

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	read := func() {
		defer wg.Done()
		errs <- n.LinearizableRead(ctx)
	}
	wg.Add(1)
	go read()
	// The first round is in flight, unanswerable without a leader.
	waitFor(t, "first round to start", func() bool { return n.readRounds.Load() == 1 })
	const later = 50
	for i := 0; i < later; i++ {
		wg.Add(1)
		go read()
	}
	waitFor(t, "later reads to join the next round", func() bool {
		n.readMu.Lock()
		defer n.readMu.Unlock()
		return n.nextRead.waiters == later
	})
	campaign(t, n)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if rounds := n.readRounds.Load(); rounds != 2 {
		t.Fatalf("%d ReadIndex rounds for 1+%d reads, want 2 (one per batch)", rounds, later)
	}
}

func TestLinearizableReadWithoutLeaderHonoursContext(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.TickInterval = time.Hour
	n := mustStart(t, cfg, newFakeSM())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := n.LinearizableRead(ctx)
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read without a leader: %v, want ErrNoLeader and DeadlineExceeded", err)
	}
	// The abandoned round does not block reads once a leader exists.
	campaign(t, n)
	if err := n.LinearizableRead(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

func TestLinearizableReadSeesPriorWrites(t *testing.T) {
	sm := newFakeSM()
	n := mustStart(t, testConfig(t, t.TempDir()), sm)
	waitLeader(t, n)
	ctx := testContext(t)
	for i := 0; i < 20; i++ {
		if err := n.Propose(ctx, []byte{'w', byte(i)}); err != nil {
			t.Fatal(err)
		}
		// Whatever was committed before the read started must be applied
		// when it returns.
		committedBefore := n.Status().CommitIndex
		if err := n.LinearizableRead(ctx); err != nil {
			t.Fatal(err)
		}
		if got := sm.AppliedIndex(); got < committedBefore {
			t.Fatalf("read returned at applied %d although %d was committed before it started", got, committedBefore)
		}
	}
}
