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
)

// nextLeader receives from an Observe channel until it reports value, and
// fails on any other value not listed in skip.
func nextLeader(ctx context.Context, t *testing.T, observed <-chan clientv3.GetResponse, want string) clientv3.GetResponse {
	t.Helper()
	select {
	case resp, ok := <-observed:
		if !ok {
			t.Fatalf("observe channel closed while waiting for %q", want)
		}
		if got := string(resp.Kvs[0].Value); got != want {
			t.Fatalf("observed leader value %q, want %q", got, want)
		}
		return resp
	case <-ctx.Done():
		t.Fatalf("waiting to observe %q: %v", want, ctx.Err())
	}
	panic("unreachable")
}

// testElection: campaign, proclaim, observe, resign and hand-over between
// two candidates, with the errors for a non-leader and an empty election.
func testElection(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	name := keyPrefix(t) + "/election"

	watcher := concurrency.NewElection(newSession(t, cli), name)
	if _, err := watcher.Leader(ctx); !errors.Is(err, concurrency.ErrElectionNoLeader) {
		t.Fatalf("Leader of an empty election = %v, want ErrElectionNoLeader", err)
	}
	observeCtx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	observed := watcher.Observe(observeCtx)

	first := concurrency.NewElection(newSession(t, cli), name)
	if err := first.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	resp := nextLeader(ctx, t, observed, "a")
	if string(resp.Kvs[0].Key) != first.Key() || resp.Kvs[0].CreateRevision != first.Rev() {
		t.Fatalf("observed leader key %q rev %d, want %q rev %d", resp.Kvs[0].Key, resp.Kvs[0].CreateRevision, first.Key(), first.Rev())
	}

	second := concurrency.NewElection(newSession(t, cli), name)
	elected := make(chan error, 1)
	go func() { elected <- second.Campaign(ctx, "b") }()
	if err := waitForKeys(ctx, cli, name+"/", 2); err != nil {
		t.Fatal(err)
	}
	if err := first.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	nextLeader(ctx, t, observed, "a2")
	if leader, err := second.Leader(ctx); err != nil || string(leader.Kvs[0].Value) != "a2" {
		t.Fatalf("Leader = %v, %v; want a2", leader, err)
	}
	select {
	case err := <-elected:
		t.Fatalf("second candidate elected while the first leads (err %v)", err)
	default:
	}

	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-elected; err != nil {
		t.Fatalf("second candidate after the leader resigned: %v", err)
	}
	nextLeader(ctx, t, observed, "b")
	if err := first.Proclaim(ctx, "stale"); !errors.Is(err, concurrency.ErrElectionNotLeader) {
		t.Fatalf("Proclaim after Resign = %v, want ErrElectionNotLeader", err)
	}

	// A leader resumed from its key and revision can still proclaim.
	resumed := concurrency.ResumeElection(newSession(t, cli), name+"/", second.Key(), second.Rev())
	if err := resumed.Proclaim(ctx, "b2"); err != nil {
		t.Fatal(err)
	}
	nextLeader(ctx, t, observed, "b2")
	if err := second.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := watcher.Leader(ctx); !errors.Is(err, concurrency.ErrElectionNoLeader) {
		t.Fatalf("Leader after everyone resigned = %v, want ErrElectionNoLeader", err)
	}
	stopObserving()
	for range observed {
	}
}

// testCancelledCampaign: a candidate that gives up waiting removes its key.
func testCancelledCampaign(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	name := keyPrefix(t) + "/election"
	leader := concurrency.NewElection(newSession(t, cli), name)
	if err := leader.Campaign(ctx, "leader"); err != nil {
		t.Fatal(err)
	}
	campaignCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	candidate := concurrency.NewElection(newSession(t, cli), name)
	result := make(chan error, 1)
	go func() { result <- candidate.Campaign(campaignCtx, "candidate") }()
	if err := waitForKeys(ctx, cli, name+"/", 2); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Campaign = %v, want context.Canceled", err)
	}
	if keys := keysUnder(ctx, t, cli, name+"/"); len(keys) != 1 || keys[0] != leader.Key() {
		t.Fatalf("keys after the candidate gave up = %v, want only the leader's %q", keys, leader.Key())
	}
}

// testSTMCounter: 8 workers each add 1 to a counter 8 times through NewSTM
// at the given isolation level, retrying on conflict. Any lost update
// leaves the counter short of 64.
func testSTMCounter(t *testing.T, e *env, iso concurrency.Isolation) {
	const workers, increments = 8, 8
	ctx := testContext(t, scenarioTimeout)
	key := keyPrefix(t) + "/counter"
	clients := []*clientv3.Client{e.newClient(t), e.newClient(t)}
	var runs atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for i := range workers {
		cli := clients[i%len(clients)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range increments {
				_, err := concurrency.NewSTM(cli, func(s concurrency.STM) error {
					runs.Add(1)
					n, _ := strconv.Atoi(s.Get(key))
					s.Put(key, strconv.Itoa(n+1))
					return nil
				}, concurrency.WithIsolation(iso), concurrency.WithAbortContext(ctx))
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	resp, err := clients[0].Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(resp.Kvs[0].Value), strconv.Itoa(workers*increments); got != want {
		t.Fatalf("counter = %s, want %s: updates were lost", got, want)
	}
	t.Logf("%d increments took %d runs", workers*increments, runs.Load())
}

// testSTMReadCommitted: ReadCommitted guards nothing, so the counter may
// lose updates (etcd documents this), but every transaction commits on its
// first run and its write set is applied atomically: two keys written
// together always carry the same value.
func testSTMReadCommitted(t *testing.T, e *env) {
	const workers, increments = 4, 5
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	a, b := keyPrefix(t)+"/a", keyPrefix(t)+"/b"
	var runs atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range increments {
				val := fmt.Sprintf("w%d-%d", w, i)
				_, err := concurrency.NewSTM(cli, func(s concurrency.STM) error {
					runs.Add(1)
					s.Get(a)
					s.Put(a, val)
					s.Put(b, val)
					return nil
				}, concurrency.WithIsolation(concurrency.ReadCommitted), concurrency.WithAbortContext(ctx))
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if got := runs.Load(); got != workers*increments {
		t.Fatalf("ReadCommitted ran the function %d times for %d transactions: it never retries", got, workers*increments)
	}
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(a), clientv3.OpGet(b)).Commit()
	if err != nil {
		t.Fatal(err)
	}
	va := string(resp.Responses[0].GetResponseRange().Kvs[0].Value)
	vb := string(resp.Responses[1].GetResponseRange().Kvs[0].Value)
	if va != vb {
		t.Fatalf("a=%q b=%q: a write set was applied partially", va, vb)
	}
}

// testSTMPrefetchAndRev: prefetched keys, Rev, Del and an aborting
// function behave as in etcd.
func testSTMPrefetchAndRev(t *testing.T, e *env) {
	ctx := testContext(t, scenarioTimeout)
	cli := e.newClient(t)
	pfx := keyPrefix(t)
	put, err := cli.Put(ctx, pfx+"/x", "1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = concurrency.NewSTM(cli, func(s concurrency.STM) error {
		if got := s.Get(pfx + "/x"); got != "1" {
			return fmt.Errorf("Get(x) = %q, want 1", got)
		}
		if got := s.Rev(pfx + "/x"); got != put.Header.Revision {
			return fmt.Errorf("Rev(x) = %d, want %d", got, put.Header.Revision)
		}
		if got := s.Rev(pfx + "/missing"); got != 0 {
			return fmt.Errorf("Rev(missing) = %d, want 0", got)
		}
		s.Put(pfx+"/y", "2")
		if got := s.Get(pfx + "/y"); got != "2" {
			return fmt.Errorf("Get after Put = %q, want the buffered 2", got)
		}
		s.Del(pfx + "/x")
		if got := s.Get(pfx + "/x"); got != "" {
			return fmt.Errorf("Get after Del = %q, want empty", got)
		}
		return nil
	}, concurrency.WithPrefetch(pfx+"/x", pfx+"/y"), concurrency.WithAbortContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, pfx+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != pfx+"/y" || string(resp.Kvs[0].Value) != "2" {
		t.Fatalf("after commit: %v, want only y=2", resp.Kvs)
	}

	abort := errors.New("abort")
	if _, err := concurrency.NewSTM(cli, func(s concurrency.STM) error {
		s.Put(pfx+"/z", "never")
		return abort
	}); !errors.Is(err, abort) {
		t.Fatalf("NewSTM with an aborting function = %v, want its error", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := concurrency.NewSTM(cli, func(s concurrency.STM) error {
		s.Get(pfx + "/y")
		return nil
	}, concurrency.WithAbortContext(cancelled)); !errors.Is(err, context.Canceled) {
		t.Fatalf("NewSTM with a cancelled abort context = %v, want context.Canceled", err)
	}
	if keys := keysUnder(ctx, t, cli, pfx+"/z"); len(keys) != 0 {
		t.Fatalf("aborted transaction wrote %v", keys)
	}
}
