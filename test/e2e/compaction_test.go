package e2e

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

func TestCompaction(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	mustPut(ctx, t, s.cli, "k", "v1")                    // rev 2
	mustPut(ctx, t, s.cli, "k", "v2")                    // rev 3
	mustPut(ctx, t, s.cli, "x", "x")                     // rev 4
	mustPut(ctx, t, s.cli, "k", "v3")                    // rev 5
	mustPut(ctx, t, s.cli, "gone", "g")                  // rev 6
	if _, err := s.cli.Delete(ctx, "gone"); err != nil { // rev 7
		t.Fatalf("delete: %v", err)
	}
	const head = 7

	_, err := s.kv.Compact(ctx, &pb.CompactionRequest{Revision: head + 1})
	requireRPCError(t, err, rpctypes.ErrGRPCFutureRev)

	resp, err := s.kv.Compact(ctx, &pb.CompactionRequest{Revision: 4})
	if err != nil {
		t.Fatalf("compact 4: %v", err)
	}
	// Compaction is not a write: the revision stays.
	requireHeader(t, resp.Header, head)

	// Compacting again at or below the compacted revision is refused.
	_, err = s.kv.Compact(ctx, &pb.CompactionRequest{Revision: 4})
	requireRPCError(t, err, rpctypes.ErrGRPCCompacted)
	_, err = s.kv.Compact(ctx, &pb.CompactionRequest{Revision: 2})
	requireRPCError(t, err, rpctypes.ErrGRPCCompacted)

	// Reads below the compacted revision fail, at or above it they see the
	// state of that revision.
	for _, rev := range []int64{1, 2, 3} {
		for _, serializable := range []bool{false, true} {
			_, err := s.kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: rev, Serializable: serializable})
			requireRPCError(t, err, rpctypes.ErrGRPCCompacted)
		}
	}
	_, err = s.kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k"), Revision: 3}}}}})
	requireRPCError(t, err, rpctypes.ErrGRPCCompacted)

	at4 := mustRange(ctx, t, s.kv, &pb.RangeRequest{Key: []byte("k"), Revision: 4})
	requireKV(t, at4.Kvs[0], mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v2"), CreateRevision: 2, ModRevision: 3, Version: 2})
	at6 := mustRange(ctx, t, s.kv, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: 6})
	requireKeys(t, at6.Kvs, "gone", "k", "x")
	now := mustGet(ctx, t, s.cli, "", clientv3.WithPrefix())
	requireHeader(t, now.Header, head)
	requireKeys(t, now.Kvs, "k", "x")
	// Compaction keeps a key's create revision and version.
	requireKV(t, now.Kvs[0], mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v3"), CreateRevision: 2, ModRevision: 5, Version: 3})

	// A physical compaction returns once the old revisions are gone; the
	// current revision itself can be compacted.
	if _, err := s.cli.Compact(ctx, head, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("physical compact %d: %v", head, err)
	}
	_, err = s.kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: head - 1})
	requireRPCError(t, err, rpctypes.ErrGRPCCompacted)
	atHead := mustRange(ctx, t, s.kv, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: head})
	requireKeys(t, atHead.Kvs, "k", "x")
	hash, err := pb.NewMaintenanceClient(s.cli.ActiveConnection()).HashKV(ctx, &pb.HashKVRequest{})
	if err != nil {
		t.Fatalf("hashkv after compaction: %v", err)
	}
	if hash.CompactRevision != head {
		t.Fatalf("hashkv compact_revision %d, want %d", hash.CompactRevision, head)
	}

	// Writes continue from the same revision after compaction, and a
	// re-created key that was deleted before compaction starts afresh.
	requireHeader(t, mustPut(ctx, t, s.cli, "gone", "back").Header, head+1)
	got := mustGet(ctx, t, s.cli, "gone")
	requireKV(t, got.Kvs[0], mvccpb.KeyValue{Key: []byte("gone"), Value: []byte("back"), CreateRevision: head + 1, ModRevision: head + 1, Version: 1})
	_, err = s.kv.Compact(ctx, &pb.CompactionRequest{Revision: head + 2})
	requireRPCError(t, err, rpctypes.ErrGRPCFutureRev)
}

func TestHashKV(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	maint := pb.NewMaintenanceClient(s.cli.ActiveConnection())

	for _, k := range []string{"a", "b", "c"} {
		mustPut(ctx, t, s.cli, k, "v-"+k) // revs 2..4
	}
	hashAt := func(rev int64) *pb.HashKVResponse {
		t.Helper()
		resp, err := maint.HashKV(ctx, &pb.HashKVRequest{Revision: rev})
		if err != nil {
			t.Fatalf("hashkv at %d: %v", rev, err)
		}
		return resp
	}

	first, second := hashAt(0), hashAt(0)
	if first.Hash != second.Hash {
		t.Fatalf("hashkv changed without writes: %d then %d", first.Hash, second.Hash)
	}
	if first.HashRevision != 4 || first.Header.Revision != 4 {
		t.Fatalf("hashkv hash_revision=%d header revision=%d, want 4 and 4", first.HashRevision, first.Header.Revision)
	}
	if explicit := hashAt(4); explicit.Hash != first.Hash || explicit.HashRevision != 4 {
		t.Fatalf("hashkv at 4 = %d (hash_revision %d), want %d as for revision 0", explicit.Hash, explicit.HashRevision, first.Hash)
	}

	mustPut(ctx, t, s.cli, "a", "changed") // rev 5
	after := hashAt(0)
	if after.Hash == first.Hash {
		t.Fatal("hashkv unchanged after a write")
	}
	if after.HashRevision != 5 {
		t.Fatalf("hashkv hash_revision %d after write, want 5", after.HashRevision)
	}
	// A revision's hash is fixed once written: later writes don't change it.
	if past := hashAt(4); past.Hash != first.Hash {
		t.Fatalf("hashkv at 4 changed from %d to %d after a later write", first.Hash, past.Hash)
	}
	_, err := maint.HashKV(ctx, &pb.HashKVRequest{Revision: 6})
	requireRPCError(t, err, rpctypes.ErrGRPCFutureRev)
}
