package sdk

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/pkg/concurrency"
	"github.com/metastore-io/metastore/test/framework"
)

// TestConcurrency runs the behaviour of pkg/concurrency, etcd's package
// rewritten, against both servers.
func TestConcurrency(t *testing.T) {
	forEachTarget(t, framework.ClusterConfig{}, func(t *testing.T, e *env) {
		t.Run("MutexExclusion", func(t *testing.T) { t.Parallel(); testMutexExclusion(t, e) })
		t.Run("MutexFIFO", func(t *testing.T) { t.Parallel(); testMutexFIFO(t, e) })
		t.Run("TryLock", func(t *testing.T) { t.Parallel(); testTryLock(t, e) })
		t.Run("HolderLeaseExpiry", func(t *testing.T) { t.Parallel(); testHolderLeaseExpiry(t, e) })
		t.Run("CancelledWaiterLeavesNoKey", func(t *testing.T) { t.Parallel(); testCancelledWaiter(t, e) })
		t.Run("Election", func(t *testing.T) { t.Parallel(); testElection(t, e) })
		t.Run("CancelledCampaignLeavesNoKey", func(t *testing.T) { t.Parallel(); testCancelledCampaign(t, e) })
		for _, iso := range []struct {
			name string
			lvl  concurrency.Isolation
		}{
			{"SerializableSnapshot", concurrency.SerializableSnapshot},
			{"Serializable", concurrency.Serializable},
			{"RepeatableReads", concurrency.RepeatableReads},
		} {
			t.Run("STMCounter/"+iso.name, func(t *testing.T) { t.Parallel(); testSTMCounter(t, e, iso.lvl) })
		}
		t.Run("STMReadCommitted", func(t *testing.T) { t.Parallel(); testSTMReadCommitted(t, e) })
		t.Run("STMPrefetchAndRev", func(t *testing.T) { t.Parallel(); testSTMPrefetchAndRev(t, e) })
	})
}

func newSession(t *testing.T, cli *clientv3.Client, opts ...concurrency.SessionOption) *concurrency.Session {
	t.Helper()
	s, err := concurrency.NewSession(cli, opts...)
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testMutexExclusion: 20 sessions over 4 connections take the same mutex
// repeatedly. Inside the critical section each does an unguarded
// read-modify-write of a counter key and marks itself inside; overlap or a
// lost increment means two held the lock at once.
func testMutexExclusion(t *testing.T, e *env) {
	clients := make([]*clientv3.Client, 4)
	for i := range clients {
		clients[i] = e.newClient(t)
	}
	mutexExclusion(t, clients)
}

// mutexExclusion runs the exclusion check with sessions spread over
// clients.
func mutexExclusion(t *testing.T, clients []*clientv3.Client) {
	const sessions, rounds = 20, 5
	ctx := testContext(t, scenarioTimeout)
	pfx := keyPrefix(t)
	counterKey := pfx + "/counter"
	var inside atomic.Int32
	errc := make(chan error, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		cli := clients[i%len(clients)]
		s := newSession(t, cli)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- func() error {
				m := concurrency.NewMutex(s, pfx+"/lock")
				for range rounds {
					if err := m.Lock(ctx); err != nil {
						return fmt.Errorf("lock: %w", err)
					}
					if n := inside.Add(1); n != 1 {
						return fmt.Errorf("%d holders inside the critical section", n)
					}
					resp, err := cli.Get(ctx, counterKey)
					if err != nil {
						return err
					}
					n := 0
					if len(resp.Kvs) > 0 {
						n, _ = strconv.Atoi(string(resp.Kvs[0].Value))
					}
					if _, err := cli.Put(ctx, counterKey, strconv.Itoa(n+1)); err != nil {
						return err
					}
					inside.Add(-1)
					if err := m.Unlock(ctx); err != nil {
						return fmt.Errorf("unlock: %w", err)
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	resp, err := clients[0].Get(ctx, counterKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Kvs[0].Value); got != strconv.Itoa(sessions*rounds) {
		t.Fatalf("counter = %s after %d locked increments: the mutex let two holders in", got, sessions*rounds)
	}
	if keys := keysUnder(ctx, t, clients[0], pfx+"/lock/"); len(keys) != 0 {
		t.Fatalf("keys left under the mutex after every unlock: %v", keys)
	}
}

// testMutexFIFO: with the mutex held, three sessions queue one after the
// other; on release they acquire in the order they queued.
func testMutexFIFO(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	lockName := keyPrefix(t) + "/lock"

	holder := concurrency.NewMutex(newSession(t, cli), lockName)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	const waiters = 3
	order := make(chan int, waiters)
	errc := make(chan error, waiters)
	for i := range waiters {
		m := concurrency.NewMutex(newSession(t, cli), lockName)
		go func() {
			if err := m.Lock(ctx); err != nil {
				errc <- err
				return
			}
			order <- i
			errc <- m.Unlock(ctx)
		}()
		// Queue strictly one after the other: wait for this waiter's key.
		if err := waitForKeys(ctx, cli, lockName+"/", int64(i+2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for want := range waiters {
		select {
		case got := <-order:
			if got != want {
				t.Fatalf("waiter %d acquired in position %d: not FIFO", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("waiting for waiter %d: %v", want, ctx.Err())
		}
	}
	for range waiters {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// testTryLock: TryLock fails fast with ErrLocked while another session
// holds the mutex, leaves no key behind, and succeeds once it is free.
func testTryLock(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	lockName := keyPrefix(t) + "/lock"
	holder := concurrency.NewMutex(newSession(t, cli), lockName)
	if err := holder.TryLock(ctx); err != nil {
		t.Fatalf("TryLock on a free mutex: %v", err)
	}
	other := concurrency.NewMutex(newSession(t, cli), lockName)
	if err := other.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Fatalf("TryLock on a held mutex = %v, want ErrLocked", err)
	}
	if keys := keysUnder(ctx, t, cli, lockName+"/"); len(keys) != 1 || keys[0] != holder.Key() {
		t.Fatalf("keys after a failed TryLock = %v, want only the holder's %q", keys, holder.Key())
	}
	if err := other.Unlock(ctx); !errors.Is(err, concurrency.ErrLockReleased) {
		t.Fatalf("Unlock after a failed TryLock = %v, want ErrLockReleased", err)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	resp, err := cli.Txn(ctx).If(other.IsOwner()).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("IsOwner after TryLock: succeeded=%v err=%v", resp != nil && resp.Succeeded, err)
	}
	if other.Header() == nil || other.Header().Revision == 0 {
		t.Fatalf("Header after TryLock = %v", other.Header())
	}
}

// testHolderLeaseExpiry: a holder that stops renewing loses the mutex when
// its lease expires, and the waiter behind it gets it.
func testHolderLeaseExpiry(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	lockName := keyPrefix(t) + "/lock"
	holderSession := newSession(t, cli, concurrency.WithTTL(shortTTL))
	holder := concurrency.NewMutex(holderSession, lockName)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter := concurrency.NewMutex(newSession(t, cli), lockName)
	acquired := make(chan error, 1)
	go func() { acquired <- waiter.Lock(ctx) }()
	if err := waitForKeys(ctx, cli, lockName+"/", 2); err != nil {
		t.Fatal(err)
	}
	// The holder "crashes": renewals stop, the lease runs out.
	holderSession.Orphan()
	select {
	case err := <-acquired:
		if err != nil {
			t.Fatalf("waiter after the holder's lease expired: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("waiter never acquired after the holder's lease expired")
	}
	if keys := keysUnder(ctx, t, cli, lockName+"/"); len(keys) != 1 || keys[0] != waiter.Key() {
		t.Fatalf("keys = %v, want only the new holder's %q", keys, waiter.Key())
	}
}

// testCancelledWaiter: a waiter whose context is cancelled returns the
// context's error and has deleted its key by the time Lock returns.
func testCancelledWaiter(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	lockName := keyPrefix(t) + "/lock"
	holder := concurrency.NewMutex(newSession(t, cli), lockName)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiter := concurrency.NewMutex(newSession(t, cli), lockName)
	result := make(chan error, 1)
	go func() { result <- waiter.Lock(waitCtx) }()
	if err := waitForKeys(ctx, cli, lockName+"/", 2); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-result:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock = %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("cancelled Lock did not return")
	}
	if keys := keysUnder(ctx, t, cli, lockName+"/"); len(keys) != 1 || keys[0] != holder.Key() {
		t.Fatalf("keys after the waiter gave up = %v, want only the holder's %q", keys, holder.Key())
	}
}
