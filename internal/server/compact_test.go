package server

import (
	"context"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// TestCompactionFinishesWhileIdle: a compaction deletes its old
// revisions --compaction-batch-limit at a time, one batch per apply
// commit; with no writes after it, the apply loop's idle work commits the
// batches until every old revision is gone. Reads below the compacted
// revision fail from the start. A physical compaction (etcd's
// --physical) is answered only once its batches are all committed.
func TestCompactionFinishesWhileIdle(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.CompactionBatchLimit = 10
	s := startServer(t, cfg)
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	const keys = 100
	rewrite := func(rounds int) {
		t.Helper()
		for round := range rounds {
			var ops []*pb.RequestOp
			for i := range keys {
				ops = append(ops, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
					Key: fmt.Appendf(nil, "k%03d", i), Value: fmt.Appendf(nil, "v%d", round)}}})
			}
			if _, err := s.Txn(ctx, &pb.TxnRequest{Success: ops}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rewrite(3)
	rev := s.Rev()
	if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: rev}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("k000"), Revision: rev - 1}); err == nil {
		t.Fatal("a read below the compacted revision succeeded")
	}
	if err := s.compacted.Wait(ctx, uint64(rev)); err != nil {
		t.Fatalf("compaction at %d not finished while idle (finished: %d): %v", rev, s.kv.FinishedCompactRev(), err)
	}
	view := s.kv.SnapshotView()
	defer view.Release()
	records := 0
	if err := view.Ascend([]byte{kvstore.BucketRevision}, []byte{kvstore.BucketRevision + 1}, func(_, _ []byte) bool {
		records++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if records != keys {
		t.Fatalf("%d revision records after the compaction, want %d (each key's latest)", records, keys)
	}
	if s.Rev() != rev {
		t.Fatalf("revision moved from %d to %d with no writes", rev, s.Rev())
	}

	// A physical compaction is answered once its old revisions are gone.
	rewrite(5)
	rev = s.Rev()
	if _, err := s.Compact(ctx, &pb.CompactionRequest{Revision: rev, Physical: true}); err != nil {
		t.Fatal(err)
	}
	if done := s.kv.FinishedCompactRev(); done != rev {
		t.Fatalf("physical compaction at %d answered with the compaction finished only up to %d", rev, done)
	}
}
