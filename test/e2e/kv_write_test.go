package e2e

import (
	"bytes"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

func TestPutOptions(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	// prev_kv on a new key returns nothing, on an existing key the old pair.
	first, err := s.kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v1"), PrevKv: true})
	if err != nil {
		t.Fatalf("put with prev_kv: %v", err)
	}
	requireHeader(t, first.Header, 2)
	if first.PrevKv != nil {
		t.Fatalf("prev_kv of a new key: %v", first.PrevKv)
	}
	second, err := s.kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v2"), PrevKv: true})
	if err != nil {
		t.Fatalf("put with prev_kv: %v", err)
	}
	requireHeader(t, second.Header, 3)
	requireKV(t, second.PrevKv, mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v1"), CreateRevision: 2, ModRevision: 2, Version: 1})

	// ignore_value keeps the value but is still a write: new revision and
	// version.
	ign, err := s.kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), IgnoreValue: true, PrevKv: true})
	if err != nil {
		t.Fatalf("put with ignore_value: %v", err)
	}
	requireHeader(t, ign.Header, 4)
	requireKV(t, ign.PrevKv, mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v2"), CreateRevision: 2, ModRevision: 3, Version: 2})
	got := mustGet(ctx, t, s.cli, "k")
	requireKV(t, got.Kvs[0], mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v2"), CreateRevision: 2, ModRevision: 4, Version: 3})

	// ignore_lease keeps the (absent) lease and takes the new value.
	if _, err := s.kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v3"), IgnoreLease: true}); err != nil {
		t.Fatalf("put with ignore_lease: %v", err)
	}
	got = mustGet(ctx, t, s.cli, "k")
	requireKV(t, got.Kvs[0], mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v3"), CreateRevision: 2, ModRevision: 5, Version: 4})

	// The flags need an existing key, and conflict with an explicit value
	// or lease. None of these failures writes anything.
	_, err = s.kv.Put(ctx, &pb.PutRequest{Key: []byte("missing"), IgnoreValue: true})
	requireRPCError(t, err, rpctypes.ErrGRPCKeyNotFound)
	_, err = s.kv.Put(ctx, &pb.PutRequest{Key: []byte("missing"), Value: []byte("v"), IgnoreLease: true})
	requireRPCError(t, err, rpctypes.ErrGRPCKeyNotFound)
	_, err = s.kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v"), IgnoreValue: true})
	requireRPCError(t, err, rpctypes.ErrGRPCValueProvided)
	_, err = s.kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v"), Lease: 42, IgnoreLease: true})
	requireRPCError(t, err, rpctypes.ErrGRPCLeaseProvided)

	// Attaching a lease that was never granted is refused.
	_, err = s.kv.Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v"), Lease: 0x1234567})
	requireRPCError(t, err, rpctypes.ErrGRPCLeaseNotFound)

	if rev := currentRevision(ctx, t, s.cli); rev != 5 {
		t.Fatalf("revision after refused puts is %d, want 5", rev)
	}
	if got := mustGet(ctx, t, s.cli, "missing"); len(got.Kvs) != 0 {
		t.Fatalf("refused put created %q", got.Kvs[0].Key)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	for _, k := range []string{"d/a", "d/b", "d/c", "e"} {
		mustPut(ctx, t, s.cli, k, "v-"+k) // revs 2..5
	}

	// Deleting nothing succeeds, reports 0 and does not create a revision.
	none, err := s.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("nope"), PrevKv: true})
	if err != nil {
		t.Fatalf("delete missing key: %v", err)
	}
	requireHeader(t, none.Header, 5)
	if none.Deleted != 0 || len(none.PrevKvs) != 0 {
		t.Fatalf("delete missing key: deleted=%d prev_kvs=%v", none.Deleted, none.PrevKvs)
	}
	none, err = s.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("x"), RangeEnd: []byte("y")})
	if err != nil {
		t.Fatalf("delete empty range: %v", err)
	}
	requireHeader(t, none.Header, 5)
	if none.Deleted != 0 {
		t.Fatalf("delete empty range deleted %d", none.Deleted)
	}

	// A range delete with prev_kv returns the deleted pairs in key order;
	// all deletions share one revision.
	resp, err := s.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte("d/a"), RangeEnd: []byte("d/c"), PrevKv: true})
	if err != nil {
		t.Fatalf("delete range: %v", err)
	}
	requireHeader(t, resp.Header, 6)
	if resp.Deleted != 2 || len(resp.PrevKvs) != 2 {
		t.Fatalf("delete range: deleted=%d prev_kvs=%d, want 2 and 2", resp.Deleted, len(resp.PrevKvs))
	}
	requireKV(t, resp.PrevKvs[0], mvccpb.KeyValue{Key: []byte("d/a"), Value: []byte("v-d/a"), CreateRevision: 2, ModRevision: 2, Version: 1})
	requireKV(t, resp.PrevKvs[1], mvccpb.KeyValue{Key: []byte("d/b"), Value: []byte("v-d/b"), CreateRevision: 3, ModRevision: 3, Version: 1})

	// Without prev_kv no pairs come back.
	pfx, err := s.cli.Delete(ctx, "d/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("delete prefix: %v", err)
	}
	requireHeader(t, pfx.Header, 7)
	if pfx.Deleted != 1 || len(pfx.PrevKvs) != 0 {
		t.Fatalf("delete prefix: deleted=%d prev_kvs=%d, want 1 and 0", pfx.Deleted, len(pfx.PrevKvs))
	}

	// The deleted keys are still visible at older revisions.
	old := mustRange(ctx, t, s.kv, &pb.RangeRequest{Key: []byte("d/"), RangeEnd: []byte("d0"), Revision: 5})
	requireKeys(t, old.Kvs, "d/a", "d/b", "d/c")
	now := mustGet(ctx, t, s.cli, "", clientv3.WithPrefix())
	requireKeys(t, now.Kvs, "e")

	// From-key delete (range_end "\x00") removes everything at or after key.
	all, err := s.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte{0}, RangeEnd: []byte{0}})
	if err != nil {
		t.Fatalf("delete all: %v", err)
	}
	requireHeader(t, all.Header, 8)
	if all.Deleted != 1 {
		t.Fatalf("delete all deleted %d, want 1", all.Deleted)
	}
}

func TestEmptyKeyIsRejected(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	_, err := s.kv.Range(ctx, &pb.RangeRequest{})
	requireRPCError(t, err, rpctypes.ErrGRPCEmptyKey)
	_, err = s.kv.Range(ctx, &pb.RangeRequest{RangeEnd: []byte("z")})
	requireRPCError(t, err, rpctypes.ErrGRPCEmptyKey)
	_, err = s.kv.Put(ctx, &pb.PutRequest{Value: []byte("v")})
	requireRPCError(t, err, rpctypes.ErrGRPCEmptyKey)
	_, err = s.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{})
	requireRPCError(t, err, rpctypes.ErrGRPCEmptyKey)
	_, err = s.kv.Txn(ctx, &pb.TxnRequest{Compare: []*pb.Compare{{Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL}}})
	requireRPCError(t, err, rpctypes.ErrGRPCEmptyKey)
	_, err = s.kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{putOp("ok", "v"), putOp("", "v")}})
	requireRPCError(t, err, rpctypes.ErrGRPCEmptyKey)
	_, err = s.kv.Txn(ctx, &pb.TxnRequest{Failure: []*pb.RequestOp{rangeOp("")}})
	requireRPCError(t, err, rpctypes.ErrGRPCEmptyKey)

	if rev := currentRevision(ctx, t, s.cli); rev != 1 {
		t.Fatalf("revision after rejected requests is %d, want 1", rev)
	}
}

func TestRequestTooLarge(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	// The default --max-request-bytes is 1.5 MiB. 1 MiB fits.
	big := bytes.Repeat([]byte("x"), 1<<20)
	resp, err := s.kv.Put(ctx, &pb.PutRequest{Key: []byte("big"), Value: big})
	if err != nil {
		t.Fatalf("put 1 MiB value: %v", err)
	}
	requireHeader(t, resp.Header, 2)
	got := mustGet(ctx, t, s.cli, "big")
	if !bytes.Equal(got.Kvs[0].Value, big) {
		t.Fatalf("1 MiB value came back with %d bytes", len(got.Kvs[0].Value))
	}

	// 1.6 MiB passes the gRPC message limit (max-request-bytes + 512 KiB)
	// but not the server's request size check.
	tooBig := bytes.Repeat([]byte("y"), 1<<20+600<<10)
	_, err = s.kv.Put(ctx, &pb.PutRequest{Key: []byte("too-big"), Value: tooBig})
	requireRPCError(t, err, rpctypes.ErrGRPCRequestTooLarge)
	half := tooBig[:len(tooBig)/2]
	_, err = s.kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("t1"), Value: half}}},
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("t2"), Value: half}}},
	}})
	requireRPCError(t, err, rpctypes.ErrGRPCRequestTooLarge)

	if rev := currentRevision(ctx, t, s.cli); rev != 2 {
		t.Fatalf("revision after rejected requests is %d, want 2", rev)
	}
}
