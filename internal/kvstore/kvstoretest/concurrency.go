package kvstoretest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// concurrentKeys is how many keys every write of testConcurrentReads
// sets, all to the revision it writes at.
const concurrentKeys = 5

func concurrentKey(i int) string { return "k" + strconv.Itoa(i) }

// checkRevisionState verifies a read at revision rev of the keys written
// by testConcurrentReads: each write sets every key to its own revision,
// so at any rev >= 2 all keys hold rev, with mod_revision rev.
func checkRevisionState(kvs []*mvccpb.KeyValue, rev int64) error {
	if rev < 2 {
		if len(kvs) != 0 {
			return fmt.Errorf("at %d: %d keys, want none", rev, len(kvs))
		}
		return nil
	}
	if len(kvs) != concurrentKeys {
		return fmt.Errorf("at %d: %d keys, want %d", rev, len(kvs), concurrentKeys)
	}
	for _, kv := range kvs {
		if kv.ModRevision != rev || string(kv.Value) != strconv.FormatInt(rev, 10) {
			return fmt.Errorf("at %d: %s = %q with mod revision %d", rev, kv.Key, kv.Value, kv.ModRevision)
		}
	}
	return nil
}

// readerRound does one randomly chosen read and checks it. Reads racing
// a compaction must give either correct data or ErrCompacted.
func readerRound(s *kvstore.Store, rng *rand.Rand) error {
	cur := s.Rev()
	rev := 1 + rng.Int64N(cur)
	compacted := func(err error) error {
		if !errors.Is(err, kvstore.ErrCompacted) {
			return err
		}
		if c := s.CompactRev(); rev >= c {
			return fmt.Errorf("ErrCompacted at %d but the compacted revision is %d", rev, c)
		}
		return nil
	}
	switch rng.IntN(4) {
	case 0:
		resp, err := s.Range(&pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l"), Revision: rev})
		if err != nil {
			return compacted(err)
		}
		return checkRevisionState(resp.Kvs, rev)
	case 1:
		resp, err := s.ReadTxn(txn(cmps(over(CmpMod("k", gt, 0), "l")),
			ops(OpRange(span("k", "l"))), ops(OpRange(span("k", "l")))))
		if err != nil {
			return err
		}
		inner := resp.Responses[0].GetResponseRange()
		if resp.Header.Revision < cur || inner.Header.Revision != resp.Header.Revision {
			return fmt.Errorf("read txn at %d (current was %d) has a range at %d", resp.Header.Revision, cur, inner.Header.Revision)
		}
		return checkRevisionState(inner.Kvs, resp.Header.Revision)
	case 2:
		events, next, err := s.Events(rev, rev+1, []byte("k"), []byte("l"), 0)
		if err != nil {
			return compacted(err)
		}
		if next != rev+1 || (rev >= 2 && len(events) != concurrentKeys) || (rev < 2 && len(events) != 0) {
			return fmt.Errorf("events at %d: %d events, next %d", rev, len(events), next)
		}
		for _, ev := range events {
			if ev.Kv.ModRevision != rev {
				return fmt.Errorf("events at %d hold %v", rev, ev)
			}
		}
		return nil
	default:
		h, err := s.HashKV(rev)
		if err != nil {
			return compacted(err)
		}
		if h.HashRevision != rev || h.Revision < rev {
			return fmt.Errorf("HashKV(%d) = %+v", rev, h)
		}
		return nil
	}
}

func testConcurrentReads(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	const (
		writes  = 300
		readers = 3
	)
	s := open(t, newBackend(t), kvstore.Options{})
	done := make(chan struct{})
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for rounds := 0; ; rounds++ {
				select {
				case <-done:
					if rounds > 0 {
						return
					}
				default:
				}
				if err := readerRound(s, rng); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range writes {
		rev := s.Rev() + 1
		var puts []*pb.RequestOp
		for k := range concurrentKeys {
			puts = append(puts, OpPut(put(concurrentKey(k), strconv.FormatInt(rev, 10))))
		}
		if _, err := Exec(s, txn(nil, puts, nil)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if i%20 == 19 {
			if _, err := Exec(s, compact(s.Rev()-5)); err != nil {
				t.Fatalf("compact: %v", err)
			}
		}
	}
	close(done)
	waitGroup(t, &wg)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// waitGroup waits for wg, failing the test after two minutes.
func waitGroup(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(2 * time.Minute):
		t.Fatal("readers still running after two minutes")
	}
}
