package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// durabilityTimeout is the deadline of a crash-and-recover test.
	durabilityTimeout = 3 * time.Minute
	// streamWriters is how many goroutines put concurrently, so that several
	// writes are in flight when the server dies.
	streamWriters = 8
	// putTimeout bounds one put of the stream.
	putTimeout = 10 * time.Second
	// stopTimeout is how long a SIGTERM shutdown may take.
	stopTimeout = 10 * time.Second
)

// ackedPut is what the server acknowledged for one key.
type ackedPut struct {
	value       string
	modRevision int64
}

// ackLog collects acknowledged puts from concurrent writers.
type ackLog struct {
	mu    sync.Mutex
	puts  map[string]ackedPut
	count int
}

func newAckLog() *ackLog { return &ackLog{puts: make(map[string]ackedPut)} }

func (l *ackLog) add(key string, put ackedPut) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.puts[key] = put
	l.count++
	return l.count
}

// streamUntilInterrupted runs streamWriters goroutines that put unique keys
// under prefix and record every acknowledged put. Once ackTarget puts are
// acknowledged - with the writers still going - it calls interrupt, which
// kills or stops the server. Errors after the interrupt are the expected
// fate of in-flight puts; an error before it fails the test.
func streamUntilInterrupted(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string, ackTarget int, interrupt func()) *ackLog {
	t.Helper()
	acks := newAckLog()
	reached := make(chan struct{})
	var reachedOnce sync.Once
	var interrupted atomic.Bool
	writeCtx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()

	var wg sync.WaitGroup
	errs := make(chan error, streamWriters)
	for w := range streamWriters {
		wg.Go(func() {
			for i := 0; writeCtx.Err() == nil; i++ {
				key := fmt.Sprintf("%s/w%d/%07d", prefix, w, i)
				value := fmt.Sprintf("value of %s written at %d", key, time.Now().UnixNano())
				putCtx, cancel := context.WithTimeout(writeCtx, putTimeout)
				resp, err := cli.Put(putCtx, key, value)
				cancel()
				if err != nil {
					if !interrupted.Load() {
						errs <- fmt.Errorf("put %s before the interrupt: %w", key, err)
					}
					return
				}
				if acks.add(key, ackedPut{value: value, modRevision: resp.Header.Revision}) >= ackTarget {
					reachedOnce.Do(func() { close(reached) })
				}
			}
		})
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()

	select {
	case <-reached:
	case err := <-errs:
		t.Fatal(err)
	case <-writersDone:
		t.Fatal("all writers stopped before the interrupt")
	case <-ctx.Done():
		t.Fatalf("only %d of %d puts acknowledged before the deadline", acks.count, ackTarget)
	}
	// Set before the signal, so every error caused by it is recognised.
	interrupted.Store(true)
	interrupt()
	stopWriters()
	<-writersDone
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%s: %d puts acknowledged when the server was interrupted", prefix, acks.count)
	return acks
}

// requireAcked checks that every acknowledged put is present with its value
// and the revision the server acknowledged.
func requireAcked(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string, acks *ackLog) {
	t.Helper()
	resp := mustGet(ctx, t, cli, prefix+"/", clientv3.WithPrefix())
	stored := make(map[string]ackedPut, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		stored[string(kv.Key)] = ackedPut{value: string(kv.Value), modRevision: kv.ModRevision}
	}
	var maxAcked int64
	lost := 0
	for key, want := range acks.puts {
		maxAcked = max(maxAcked, want.modRevision)
		got, ok := stored[key]
		switch {
		case !ok:
			lost++
			if lost <= 10 {
				t.Errorf("acknowledged put of %s (revision %d) lost", key, want.modRevision)
			}
		case got != want:
			t.Errorf("%s: got value %q at revision %d, acknowledged %q at revision %d", key, got.value, got.modRevision, want.value, want.modRevision)
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged puts under %s lost", lost, len(acks.puts), prefix)
	}
	if resp.Header.Revision < maxAcked {
		t.Fatalf("store revision %d is behind the acknowledged revision %d", resp.Header.Revision, maxAcked)
	}
}

// testCrashRecovery runs two rounds of: stream puts, crash the server with
// SIGKILL mid-stream, restart on the same data dir, check every
// acknowledged put. The second round recovers a store that was itself
// recovered.
func testCrashRecovery(t *testing.T, cfg framework.ClusterConfig, acksPerRound int) {
	s := startServer(t, cfg)
	ctx := testContext(t, durabilityTimeout)
	member := s.member()
	var rounds []*ackLog
	for round := range 2 {
		acks := streamUntilInterrupted(ctx, t, s.cli, roundPrefix(round), acksPerRound, func() {
			status, err := member.Kill()
			if err != nil {
				t.Errorf("kill -9: %v", err)
			} else if status.Signal != syscall.SIGKILL {
				t.Errorf("kill -9: process ended with %s", status)
			}
		})
		if err := member.Restart(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		rounds = append(rounds, acks)
		for r, acks := range rounds {
			requireAcked(ctx, t, s.cli, roundPrefix(r), acks)
		}
	}
	// The recovered server keeps serving writes at the next revision.
	before := currentRevision(ctx, t, s.cli)
	if rev := mustPut(ctx, t, s.cli, "after-recovery", "v").Header.Revision; rev != before+1 {
		t.Fatalf("put after recovery got revision %d, want %d", rev, before+1)
	}
}

func roundPrefix(round int) string { return fmt.Sprintf("round%d", round) }

func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	testCrashRecovery(t, framework.ClusterConfig{}, 500)
}

func TestKill9KeepsAcknowledgedWritesAcrossSnapshots(t *testing.T) {
	t.Parallel()
	// With --snapshot-count=100 each round of 3000 writes passes dozens of
	// snapshot points before the crash, and the 6000 entries of both rounds
	// exceed the 5000 entries etcd keeps behind its latest snapshot for
	// slow followers, so the raft log is truncated too.
	testCrashRecovery(t, framework.ClusterConfig{SnapshotCount: 100}, 3000)
}

func TestSigtermStopsCleanlyAndKeepsData(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, durabilityTimeout)
	member := s.member()
	target := s.cluster.Target()

	stopAndCheck := func() {
		t.Helper()
		start := time.Now()
		status, err := member.Stop(stopTimeout)
		if err != nil {
			t.Fatalf("SIGTERM: %v", err)
		}
		if !target.IsCleanStop(status) {
			t.Fatalf("SIGTERM: %s ended with %s, not a clean shutdown", target, status)
		}
		t.Logf("SIGTERM: %s after %v", status, time.Since(start))
	}

	// Stop while writes are streaming: whatever was acknowledged stays.
	acks := streamUntilInterrupted(ctx, t, s.cli, "stream", 200, stopAndCheck)
	if err := member.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	requireAcked(ctx, t, s.cli, "stream", acks)

	// Stop an idle server: the store comes back at exactly the same
	// revision with the same contents.
	mustPut(ctx, t, s.cli, "idle", "v")
	before := mustGet(ctx, t, s.cli, "", clientv3.WithPrefix())
	stopAndCheck()
	if err := member.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	after := mustGet(ctx, t, s.cli, "", clientv3.WithPrefix())
	if after.Header.Revision != before.Header.Revision || len(after.Kvs) != len(before.Kvs) {
		t.Fatalf("after restart: revision %d with %d keys, before stop: revision %d with %d keys",
			after.Header.Revision, len(after.Kvs), before.Header.Revision, len(before.Kvs))
	}
	for i := range before.Kvs {
		if before.Kvs[i].String() != after.Kvs[i].String() {
			t.Fatalf("key %d changed across restart: %v -> %v", i, before.Kvs[i], after.Kvs[i])
		}
	}
}
