package e2e

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/test/framework"
)

// testTimeout is the deadline of an ordinary test, start-up included.
const testTimeout = 90 * time.Second

// testContext returns a context that ends at the test's deadline.
func testContext(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// server is a single-member cluster with a clientv3 client and the raw KV
// stub on the same connection.
type server struct {
	cluster *framework.Cluster
	cli     *clientv3.Client
	kv      pb.KVClient
}

func startServer(t *testing.T, cfg framework.ClusterConfig) *server {
	t.Helper()
	c := framework.NewCluster(t, cfg)
	cli := c.NewClient(t)
	return &server{cluster: c, cli: cli, kv: pb.NewKVClient(cli.ActiveConnection())}
}

func (s *server) member() *framework.Member { return s.cluster.Member(0) }

// requireRPCError checks that err is a gRPC status error with exactly the
// code and message of want (one of rpctypes.ErrGRPC*).
func requireRPCError(t *testing.T, err error, want error) {
	t.Helper()
	wantStatus, _ := status.FromError(want)
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	got, ok := status.FromError(err)
	if !ok {
		t.Fatalf("got non-gRPC error %v (%T), want %v", err, err, want)
	}
	if got.Code() != wantStatus.Code() || got.Message() != wantStatus.Message() {
		t.Fatalf("got error code=%s message=%q, want code=%s message=%q",
			got.Code(), got.Message(), wantStatus.Code(), wantStatus.Message())
	}
}

func mustPut(ctx context.Context, t *testing.T, cli *clientv3.Client, key, value string, opts ...clientv3.OpOption) *clientv3.PutResponse {
	t.Helper()
	resp, err := cli.Put(ctx, key, value, opts...)
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return resp
}

func mustGet(ctx context.Context, t *testing.T, cli *clientv3.Client, key string, opts ...clientv3.OpOption) *clientv3.GetResponse {
	t.Helper()
	resp, err := cli.Get(ctx, key, opts...)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return resp
}

func mustRange(ctx context.Context, t *testing.T, kv pb.KVClient, req *pb.RangeRequest) *pb.RangeResponse {
	t.Helper()
	resp, err := kv.Range(ctx, req)
	if err != nil {
		t.Fatalf("range %q..%q: %v", req.Key, req.RangeEnd, err)
	}
	return resp
}

func mustTxn(ctx context.Context, t *testing.T, kv pb.KVClient, req *pb.TxnRequest) *pb.TxnResponse {
	t.Helper()
	resp, err := kv.Txn(ctx, req)
	if err != nil {
		t.Fatalf("txn: %v", err)
	}
	return resp
}

// currentRevision reads the store revision with a linearizable Get.
func currentRevision(ctx context.Context, t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	return mustGet(ctx, t, cli, "/e2e/revision-probe").Header.Revision
}

func keysOf(kvs []*mvccpb.KeyValue) []string {
	keys := make([]string, len(kvs))
	for i, kv := range kvs {
		keys[i] = string(kv.Key)
	}
	return keys
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func requireKeys(t *testing.T, kvs []*mvccpb.KeyValue, want ...string) {
	t.Helper()
	if got := keysOf(kvs); !equalStrings(got, want) {
		t.Fatalf("got keys %q, want %q", got, want)
	}
}

// requireKV checks every field of a returned key-value.
func requireKV(t *testing.T, got *mvccpb.KeyValue, want mvccpb.KeyValue) {
	t.Helper()
	if got == nil {
		t.Fatalf("got no key-value, want %q", want.Key)
	}
	if string(got.Key) != string(want.Key) || string(got.Value) != string(want.Value) ||
		got.CreateRevision != want.CreateRevision || got.ModRevision != want.ModRevision ||
		got.Version != want.Version || got.Lease != want.Lease {
		t.Fatalf("got kv{key=%q value=%q create=%d mod=%d version=%d lease=%d}, want kv{key=%q value=%q create=%d mod=%d version=%d lease=%d}",
			got.Key, got.Value, got.CreateRevision, got.ModRevision, got.Version, got.Lease,
			want.Key, want.Value, want.CreateRevision, want.ModRevision, want.Version, want.Lease)
	}
}

// requireHeader checks the header fields every response carries.
func requireHeader(t *testing.T, h *pb.ResponseHeader, wantRevision int64) {
	t.Helper()
	if h == nil {
		t.Fatal("response has no header")
	}
	if h.Revision != wantRevision {
		t.Fatalf("header revision %d, want %d", h.Revision, wantRevision)
	}
	if h.ClusterId == 0 || h.MemberId == 0 || h.RaftTerm == 0 {
		t.Fatalf("header has zero ids or term: cluster_id=%d member_id=%d raft_term=%d", h.ClusterId, h.MemberId, h.RaftTerm)
	}
}
