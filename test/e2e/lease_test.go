package e2e

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/metastore-io/metastore/test/framework"
)

// minLeaseTTL is the shortest TTL a server grants with the default
// election timeout (1000 ms): 1.5 election timeouts, rounded up.
const minLeaseTTL = 2

func mustGrant(ctx context.Context, t *testing.T, cli *clientv3.Client, ttl int64) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Grant(ctx, ttl)
	if err != nil {
		t.Fatalf("grant %d s: %v", ttl, err)
	}
	return resp.ID
}

func mustTimeToLive(ctx context.Context, t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) *clientv3.LeaseTimeToLiveResponse {
	t.Helper()
	resp, err := cli.TimeToLive(ctx, id, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatalf("time-to-live of %x: %v", id, err)
	}
	return resp
}

func attachedKeys(resp *clientv3.LeaseTimeToLiveResponse) []string {
	keys := make([]string, len(resp.Keys))
	for i, k := range resp.Keys {
		keys[i] = string(k)
	}
	slices.Sort(keys) // etcd lists them in no particular order
	return keys
}

func TestLeaseGrantAttachRenewRevoke(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	cli := s.cli
	leases := pb.NewLeaseClient(cli.ActiveConnection())

	id := mustGrant(ctx, t, cli, 60)
	if id == 0 {
		t.Fatal("server chose lease ID 0")
	}
	if short, err := cli.Grant(ctx, 1); err != nil || short.TTL != minLeaseTTL {
		t.Fatalf("grant of 1 s = %+v, %v; want TTL raised to %d", short, err, minLeaseTTL)
	}
	// Client-chosen IDs, duplicates and the TTL limit.
	if resp, err := leases.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 0x1234, TTL: 30}); err != nil || resp.ID != 0x1234 || resp.TTL != 30 {
		t.Fatalf("grant with ID = %+v, %v", resp, err)
	}
	_, err := leases.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 0x1234, TTL: 30})
	requireRPCError(t, err, rpctypes.ErrGRPCLeaseExist)
	_, err = leases.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 9_000_000_001})
	requireRPCError(t, err, rpctypes.ErrGRPCLeaseTTLTooLarge)

	// Attach, move, keep and detach.
	mustPut(ctx, t, cli, "lease/a", "1", clientv3.WithLease(id))
	mustPut(ctx, t, cli, "lease/b", "2", clientv3.WithLease(id))
	mustPut(ctx, t, cli, "lease/c", "3", clientv3.WithLease(id))
	mustPut(ctx, t, cli, "lease/c", "3", clientv3.WithLease(0x1234))  // moves c to the other lease
	mustPut(ctx, t, cli, "lease/b", "2b", clientv3.WithIgnoreLease()) // keeps b's lease
	mustPut(ctx, t, cli, "lease/d", "4", clientv3.WithLease(id))
	mustPut(ctx, t, cli, "lease/d", "4") // no lease: detached
	if _, err := cli.Put(ctx, "lease/x", "x", clientv3.WithLease(0x999)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Fatalf("put with unknown lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
	if got := mustGet(ctx, t, cli, "lease/b"); len(got.Kvs) != 1 || got.Kvs[0].Lease != int64(id) {
		t.Fatalf("lease/b = %v, want it to carry lease %x", got.Kvs, id)
	}
	ttl := mustTimeToLive(ctx, t, cli, id)
	if ttl.GrantedTTL != 60 || ttl.TTL < 50 || ttl.TTL > 60 {
		t.Fatalf("time-to-live = granted %d remaining %d", ttl.GrantedTTL, ttl.TTL)
	}
	if got := attachedKeys(ttl); !slices.Equal(got, []string{"lease/a", "lease/b"}) {
		t.Fatalf("attached keys %q, want [lease/a lease/b]", got)
	}

	// A txn compares on LEASE.
	txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue("lease/a"), "=", id)).Then(clientv3.OpGet("lease/a")).Commit()
	if err != nil || !txn.Succeeded {
		t.Fatalf("txn comparing LEASE = %v, %v", txn, err)
	}
	txn, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue("lease/d"), "=", id)).Commit()
	if err != nil || txn.Succeeded {
		t.Fatalf("txn comparing a detached key's LEASE = %v, %v", txn, err)
	}

	// Keep-alive answers the full TTL; list shows all three leases.
	ka, err := cli.KeepAliveOnce(ctx, id)
	if err != nil || ka.TTL != 60 {
		t.Fatalf("keep-alive = %+v, %v", ka, err)
	}
	list, err := cli.Leases(ctx)
	if err != nil || len(list.Leases) != 3 {
		t.Fatalf("leases = %+v, %v", list, err)
	}

	// Revoke deletes the attached keys, all in one revision.
	rev := currentRevision(ctx, t, cli)
	watch := cli.Watch(ctx, "lease/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	revoke, err := cli.Revoke(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if revoke.Header.Revision != rev+1 {
		t.Fatalf("revoke at revision %d, want %d", revoke.Header.Revision, rev+1)
	}
	wresp := <-watch
	if err := wresp.Err(); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, ev := range wresp.Events {
		if ev.Type != mvccpb.DELETE || ev.Kv.ModRevision != rev+1 {
			t.Fatalf("event %v, want DELETE at revision %d", ev, rev+1)
		}
		deleted = append(deleted, string(ev.Kv.Key))
	}
	if !slices.Equal(deleted, []string{"lease/a", "lease/b"}) {
		t.Fatalf("revoke deleted %q, want [lease/a lease/b] in key order", deleted)
	}
	if got := mustGet(ctx, t, cli, "lease/", clientv3.WithPrefix()); !equalStrings(keysOf(got.Kvs), []string{"lease/c", "lease/d"}) {
		t.Fatalf("keys after revoke: %q", keysOf(got.Kvs))
	}

	// A revoked lease: TimeToLive says -1, keep-alive says TTL 0, a second
	// revoke is an error.
	if ttl := mustTimeToLive(ctx, t, cli, id); ttl.TTL != -1 {
		t.Fatalf("time-to-live of revoked lease = %d, want -1", ttl.TTL)
	}
	stream, err := leases.LeaseKeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || resp.TTL != 0 || resp.ID != int64(id) {
		t.Fatalf("keep-alive of revoked lease = %+v, %v; want TTL 0", resp, err)
	}
	_, err = leases.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: int64(id)})
	requireRPCError(t, err, rpctypes.ErrGRPCLeaseNotFound)
}

// TestLeaseExpiry: a lease that is not kept alive expires, and its key's
// deletion is observed as a watch event.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	cli := s.cli

	id := mustGrant(ctx, t, cli, minLeaseTTL)
	put := mustPut(ctx, t, cli, "expiring", "v", clientv3.WithLease(id))
	watch := cli.Watch(ctx, "expiring", clientv3.WithRev(put.Header.Revision+1))
	select {
	case wresp := <-watch:
		if err := wresp.Err(); err != nil {
			t.Fatal(err)
		}
		if len(wresp.Events) != 1 || wresp.Events[0].Type != mvccpb.DELETE {
			t.Fatalf("events %v, want one DELETE", wresp.Events)
		}
	case <-ctx.Done():
		t.Fatal("the lease did not expire")
	}
	if ttl := mustTimeToLive(ctx, t, cli, id); ttl.TTL != -1 {
		t.Fatalf("time-to-live of expired lease = %d, want -1", ttl.TTL)
	}
}

// TestLeaseKeepAliveKeepsLeaseAlive: keep-alives through the client's
// stream keep a lease alive well past its TTL.
func TestLeaseKeepAliveKeepsLeaseAlive(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	cli := s.cli

	// Long enough that a loaded machine answers every keep-alive in time
	// (the client gives up on a lease whose TTL passes without an answer).
	const ttl = 5
	id := mustGrant(ctx, t, cli, ttl)
	mustPut(ctx, t, cli, "kept", "v", clientv3.WithLease(id))
	kactx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := cli.KeepAlive(kactx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The client renews every TTL/3: after the first answer, five more
	// span more than the TTL.
	var start time.Time
	for i := range 6 {
		select {
		case resp, ok := <-ch:
			if !ok {
				t.Fatalf("keep-alive channel closed after %d answers", i)
			}
			if resp.TTL != ttl {
				t.Fatalf("keep-alive TTL %d, want %d", resp.TTL, ttl)
			}
		case <-ctx.Done():
			t.Fatal("keep-alive answers stopped")
		}
		if i == 0 {
			start = time.Now()
		}
	}
	if elapsed := time.Since(start); elapsed <= ttl*time.Second {
		t.Fatalf("keep-alives spanned only %v, not more than the TTL: the check below would prove nothing", elapsed)
	}
	if got := mustGet(ctx, t, cli, "kept"); len(got.Kvs) != 1 {
		t.Fatal("the kept-alive lease's key is gone")
	}
}

// TestLeasesSurviveRestart: leases and their keys survive a clean stop
// and a kill -9, and the lease still works afterwards.
func TestLeasesSurviveRestart(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{SnapshotCount: 20})
	ctx := testContext(t, durabilityTimeout)
	member := s.member()
	cli := s.cli

	id := mustGrant(ctx, t, cli, 600)
	var want []string
	for i := range 30 { // past the snapshot count
		key := fmt.Sprintf("durable/%02d", i)
		mustPut(ctx, t, cli, key, "v", clientv3.WithLease(id))
		want = append(want, key)
	}

	for _, restart := range []struct {
		name string
		stop func() error
	}{
		{"SIGTERM", func() error { _, err := member.Stop(stopTimeout); return err }},
		{"SIGKILL", func() error { _, err := member.Kill(); return err }},
	} {
		if err := restart.stop(); err != nil {
			t.Fatalf("%s: %v", restart.name, err)
		}
		if err := member.Restart(ctx); err != nil {
			t.Fatalf("restart after %s: %v", restart.name, err)
		}
		cli = member.NewClient(t)
		ttl := mustTimeToLive(ctx, t, cli, id)
		if ttl.GrantedTTL != 600 || ttl.TTL <= 0 || ttl.TTL > 600 {
			t.Fatalf("after %s: granted %d remaining %d", restart.name, ttl.GrantedTTL, ttl.TTL)
		}
		if got := attachedKeys(ttl); !slices.Equal(got, want) {
			t.Fatalf("after %s: %d attached keys, want %d", restart.name, len(got), len(want))
		}
	}
	if _, err := cli.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(ctx, t, cli, "durable/", clientv3.WithPrefix(), clientv3.WithCountOnly()); got.Count != 0 {
		t.Fatalf("%d keys left after revoke", got.Count)
	}
}

func TestEtcdctlLease(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	ctl := etcdctlRunner{t: t, ctx: ctx, cli: s.cluster.Etcdctl()}

	granted := regexp.MustCompile(`^lease ([0-9a-f]{16}) granted with TTL\(120s\)\n$`)
	m := granted.FindStringSubmatch(ctl.ok("", "lease", "grant", "120"))
	if m == nil {
		t.Fatal("lease grant output not recognised")
	}
	hexID := m[1]
	if _, err := strconv.ParseUint(hexID, 16, 64); err != nil {
		t.Fatal(err)
	}
	ctl.expect("OK\n", "put", "ctl/key", "v", "--lease="+hexID)
	ctl.expect("found 1 leases\n"+hexID+"\n", "lease", "list")
	ttl := regexp.MustCompile(`^lease ` + hexID + ` granted with TTL\(120s\), remaining\(1[0-2][0-9]s\), attached keys\(\[ctl/key\]\)\n$`)
	if out := ctl.ok("", "lease", "timetolive", hexID, "--keys"); !ttl.MatchString(out) {
		t.Fatalf("lease timetolive printed %q", out)
	}
	ctl.expect("lease "+hexID+" keepalived with TTL(120)\n", "lease", "keep-alive", "--once", hexID)
	ctl.expect("lease "+hexID+" revoked\n", "lease", "revoke", hexID)
	ctl.expect("", "get", "ctl/key")
	ctl.expect("lease "+hexID+" already expired\n", "lease", "timetolive", hexID)
	ctl.expect("found 0 leases\n", "lease", "list")
}

// TestConcurrencyRecipes runs the official clientv3/concurrency recipes,
// which are built on leases, sessions and txns comparing revisions.
func TestConcurrencyRecipes(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	cli := s.cli

	newSession := func() *concurrency.Session {
		t.Helper()
		sess, err := concurrency.NewSession(cli, concurrency.WithTTL(10), concurrency.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sess.Close() })
		return sess
	}

	t.Run("Mutex", func(t *testing.T) {
		s1, s2 := newSession(), newSession()
		m1, m2 := concurrency.NewMutex(s1, "/recipes/lock"), concurrency.NewMutex(s2, "/recipes/lock")
		if err := m1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m2.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
			t.Fatalf("TryLock while held: %v, want ErrLocked", err)
		}
		locked := make(chan error, 1)
		go func() { locked <- m2.Lock(ctx) }()
		if err := m1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-locked; err != nil {
			t.Fatalf("second locker: %v", err)
		}
		// Closing the holder's session revokes its lease, which frees the lock.
		s3 := newSession()
		m3 := concurrency.NewMutex(s3, "/recipes/lock")
		go func() { locked <- m3.Lock(ctx) }()
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-locked; err != nil {
			t.Fatalf("locker after the holder's session closed: %v", err)
		}
		if err := m3.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Election", func(t *testing.T) {
		s1, s2 := newSession(), newSession()
		e1, e2 := concurrency.NewElection(s1, "/recipes/election"), concurrency.NewElection(s2, "/recipes/election")
		if err := e1.Campaign(ctx, "one"); err != nil {
			t.Fatal(err)
		}
		observe := e1.Observe(ctx)
		observed := func(want string) {
			t.Helper()
			resp, ok := <-observe
			if !ok || len(resp.Kvs) == 0 {
				t.Fatalf("observe ended (%v) before leader %q", ctx.Err(), want)
			}
			if got := string(resp.Kvs[0].Value); got != want {
				t.Fatalf("observed leader %q, want %q", got, want)
			}
		}
		observed("one")
		elected := make(chan error, 1)
		go func() { elected <- e2.Campaign(ctx, "two") }()
		if err := e1.Proclaim(ctx, "one again"); err != nil {
			t.Fatal(err)
		}
		observed("one again")
		if err := e1.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-elected; err != nil {
			t.Fatalf("second candidate: %v", err)
		}
		leader, err := e2.Leader(ctx)
		if err != nil || len(leader.Kvs) == 0 || string(leader.Kvs[0].Value) != "two" {
			t.Fatalf("leader = %v, %v; want two", leader, err)
		}
		observed("two")
	})

	t.Run("STM", func(t *testing.T) {
		const workers, increments = 4, 10
		mustPut(ctx, t, cli, "/recipes/counter", "0")
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Go(func() {
				for range increments {
					_, err := concurrency.NewSTM(cli, func(stm concurrency.STM) error {
						n, err := strconv.Atoi(stm.Get("/recipes/counter"))
						if err != nil {
							return err
						}
						stm.Put("/recipes/counter", strconv.Itoa(n+1))
						return nil
					}, concurrency.WithAbortContext(ctx))
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got := mustGet(ctx, t, cli, "/recipes/counter")
		if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != strconv.Itoa(workers*increments) {
			t.Fatalf("counter = %v, want %d", got.Kvs, workers*increments)
		}
	})
}
