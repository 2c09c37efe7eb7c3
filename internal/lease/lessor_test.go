package lease

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestApplyGrantErrors(t *testing.T) {
	l, _, st := newTestLessor(t, Config{MinTTL: 2})
	if _, err := l.ApplyGrant(st, 0, 10); !errors.Is(err, ErrLeaseNotFound) {
		t.Errorf("grant of lease 0: %v, want ErrLeaseNotFound", err)
	}
	if _, err := l.ApplyGrant(st, 1, MaxTTL+1); !errors.Is(err, ErrLeaseTTLTooLarge) {
		t.Errorf("grant above MaxTTL: %v, want ErrLeaseTTLTooLarge", err)
	}
	if ttl, err := l.ApplyGrant(st, 1, MaxTTL); err != nil || ttl != MaxTTL {
		t.Errorf("grant of MaxTTL: %d, %v", ttl, err)
	}
	if _, err := l.ApplyGrant(st, 1, 5); !errors.Is(err, ErrLeaseExists) {
		t.Errorf("duplicate grant: %v, want ErrLeaseExists", err)
	}
	if len(st.aux) != 1 {
		t.Errorf("failed grants wrote records: %d records", len(st.aux))
	}
}

func TestNormalizeTTL(t *testing.T) {
	l, _, _ := newTestLessor(t, Config{MinTTL: MinTTL(10, 100*time.Millisecond)})
	for _, c := range []struct{ in, want int64 }{{-5, 2}, {0, 2}, {1, 2}, {2, 2}, {3, 3}, {MaxTTL, MaxTTL}} {
		if got, err := l.NormalizeTTL(c.in); err != nil || got != c.want {
			t.Errorf("NormalizeTTL(%d) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	if _, err := l.NormalizeTTL(MaxTTL + 1); !errors.Is(err, ErrLeaseTTLTooLarge) {
		t.Errorf("NormalizeTTL(MaxTTL+1): %v", err)
	}
	// etcd: election 1000 ms -> 1.5 s -> 2 s; 5 s -> 7.5 s -> 8 s.
	if got := MinTTL(50, 100*time.Millisecond); got != 8 {
		t.Errorf("MinTTL(50 ticks of 100ms) = %d, want 8", got)
	}
}

func TestRevokeDeletesAttachedKeysInOrder(t *testing.T) {
	l, _, st := newTestLessor(t, Config{})
	mustGrant(t, l, st, 1, 10)
	mustGrant(t, l, st, 2, 10)
	st.put(t, "zeta", 1)
	st.put(t, "alpha", 1)
	st.put(t, "mid", 1)
	st.put(t, "moved", 1)
	st.put(t, "moved", 2) // re-put with another lease moves it
	st.put(t, "other", 2)
	st.put(t, "free", 0)
	revBefore := st.rev

	if err := l.ApplyRevoke(st, 1); err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"alpha", "mid", "zeta"}}; !slices.EqualFunc(st.deletes, want, slices.Equal) {
		t.Fatalf("deletes %q, want %q", st.deletes, want)
	}
	if st.rev != revBefore+1 {
		t.Errorf("revoke took %d revisions, want 1", st.rev-revBefore)
	}
	if l.LeaseExists(1) {
		t.Error("revoked lease still exists")
	}
	if _, ok := st.aux[string(append([]byte{Bucket}, recordKey(nil, 1)...))]; ok {
		t.Error("revoked lease's record not deleted")
	}
	if err := l.ApplyRevoke(st, 1); !errors.Is(err, ErrLeaseNotFound) {
		t.Errorf("second revoke: %v, want ErrLeaseNotFound", err)
	}

	// Lease 2 kept its keys; a detached key is not deleted with it.
	st.put(t, "other", 0) // re-put without lease detaches
	if err := l.ApplyRevoke(st, 2); err != nil {
		t.Fatal(err)
	}
	if got := st.deletes[1]; !slices.Equal(got, []string{"moved"}) {
		t.Errorf("revoke of lease 2 deleted %q, want [moved]", got)
	}
	if _, ok := st.keys["other"]; !ok {
		t.Error("key detached by a re-put was deleted with its old lease")
	}
}

func TestRevokeLeaseWithoutKeys(t *testing.T) {
	l, _, st := newTestLessor(t, Config{})
	mustGrant(t, l, st, 9, 10)
	rev := st.rev
	if err := l.ApplyRevoke(st, 9); err != nil {
		t.Fatal(err)
	}
	if st.rev != rev {
		t.Error("revoking a lease without keys bumped the revision")
	}
}

// lessorState is everything replicated about a lessor, for comparisons.
func lessorState(l *Lessor) map[int64]string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := map[int64]string{}
	for id, ls := range l.leases {
		keys := slices.Sorted(maps.Keys(ls.keys))
		out[id] = fmt.Sprintf("ttl=%d remaining=%d keys=%q", ls.ttl, ls.remainingTTL, keys)
	}
	return out
}

// TestApplyIsDeterministic feeds the same random operations to two
// lessors, one primary with a running clock and one follower, and checks
// they reach the same table, the same persisted bytes and the same key
// deletions: the leader's clock never leaks into apply.
func TestApplyIsDeterministic(t *testing.T) {
	leader, lclock, lst := newTestLessor(t, Config{Proposer: newFakeProposer()})
	follower, _, fst := newTestLessor(t, Config{})
	leader.Promote(time.Second)

	rng := rand.New(rand.NewPCG(7, 8))
	for range 5000 {
		id := int64(rng.IntN(40) + 1)
		key := fmt.Sprintf("k%03d", rng.IntN(200))
		op, ttl, remaining := rng.IntN(6), int64(rng.IntN(100)), int64(rng.IntN(50))
		lclock.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
		for _, side := range []struct {
			l  *Lessor
			st *fakeStore
		}{{leader, lst}, {follower, fst}} {
			l, st := side.l, side.st
			switch op {
			case 0:
				_, _ = l.ApplyGrant(st, id, ttl)
			case 1:
				_ = l.ApplyRevoke(st, id)
			case 2:
				l.ApplyCheckpoint(st, []*pb.LeaseCheckpoint{{ID: id, Remaining_TTL: remaining}})
			case 3, 4:
				if l.LeaseExists(id) {
					st.put(t, key, id)
				}
			case 5:
				if _, ok := st.keys[key]; ok {
					_ = st.DeleteKeys([][]byte{[]byte(key)})
				}
			}
		}
	}
	if !maps.Equal(lessorState(leader), lessorState(follower)) {
		t.Fatalf("tables differ:\nleader   %v\nfollower %v", lessorState(leader), lessorState(follower))
	}
	if !maps.EqualFunc(lst.aux, fst.aux, slices.Equal) {
		t.Fatal("persisted records differ")
	}
	if !slices.EqualFunc(lst.deletes, fst.deletes, slices.Equal) {
		t.Fatal("revokes deleted different keys")
	}
	if len(lessorState(leader)) == 0 || len(lst.deletes) == 0 {
		t.Fatal("the random walk exercised nothing")
	}
}

// TestRecoverRebuildsTable reopens a lessor on the persisted records, with
// the store re-attaching leased keys first as kvstore.Open does.
func TestRecoverRebuildsTable(t *testing.T) {
	l, _, st := newTestLessor(t, Config{})
	mustGrant(t, l, st, 1, 10)
	mustGrant(t, l, st, 2, 20)
	l.ApplyCheckpoint(st, []*pb.LeaseCheckpoint{{ID: 2, Remaining_TTL: 7}})
	st.put(t, "a", 1)
	st.put(t, "b", 2)
	st.put(t, "c", 2)
	want := lessorState(l)

	again, err := New(Config{Clock: newFakeClock(), Logger: l.log})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range slices.Sorted(maps.Keys(st.keys)) {
		if id := st.keys[k]; id != 0 {
			again.Attach(id, []byte(k))
		}
	}
	again.Attach(99, []byte("orphan")) // a key whose lease has no record
	if err := again.Recover(st); err != nil {
		t.Fatal(err)
	}
	if got := lessorState(again); !maps.Equal(got, want) {
		t.Fatalf("recovered %v, want %v", got, want)
	}
	// After recovery an attach to an unknown lease is ignored.
	again.Attach(98, []byte("late"))
	if again.LeaseExists(98) || len(again.pending) != 0 {
		t.Fatal("attach after recovery created state for an unknown lease")
	}
}

func TestRecoverRejectsCorruptRecord(t *testing.T) {
	st := newFakeStore()
	st.PutAux(Bucket, recordKey(nil, 3), []byte{0x08, 0x80}) // truncated varint
	l, err := New(Config{Clock: newFakeClock(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Recover(st); err == nil {
		t.Fatal("corrupt record accepted")
	}
}

func TestRestore(t *testing.T) {
	l, _, st := newTestLessor(t, Config{})
	mustGrant(t, l, st, 1, 10)
	st.put(t, "a", 1)

	// The snapshot holds lease 2 with key "b" instead.
	snap := newFakeStore()
	snap.PutAux(Bucket, recordKey(nil, 2), AppendRecord(nil, Record{ID: 2, TTL: 30}))

	// A failed store restore keeps the old table.
	failed := errors.New("corrupt snapshot")
	err := l.Restore(func() error {
		l.Attach(2, []byte("half-restored")) // the store may have begun re-attaching
		return failed
	}, snap)
	if !errors.Is(err, failed) {
		t.Fatalf("Restore: %v", err)
	}
	if got, want := lessorState(l), map[int64]string{1: `ttl=10 remaining=0 keys=["a"]`}; !maps.Equal(got, want) {
		t.Fatalf("after failed restore: %v, want %v", got, want)
	}

	if err := l.Restore(func() error {
		l.Attach(2, []byte("b"))
		return nil
	}, snap); err != nil {
		t.Fatal(err)
	}
	if got, want := lessorState(l), map[int64]string{2: `ttl=30 remaining=0 keys=["b"]`}; !maps.Equal(got, want) {
		t.Fatalf("after restore: %v, want %v", got, want)
	}
}
