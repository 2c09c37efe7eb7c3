package etcdcompat

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/pkg/rangestream"
)

// methodShapes lists a service's methods as "name unary|server|client|bidi".
func methodShapes(info grpc.ServiceInfo) []string {
	var out []string
	for _, m := range info.Methods {
		kind := map[[2]bool]string{{false, false}: "unary", {false, true}: "server", {true, false}: "client", {true, true}: "bidi"}[[2]bool{m.IsClientStream, m.IsServerStream}]
		out = append(out, m.Name+" "+kind)
	}
	slices.Sort(out)
	return out
}

// TestKVServiceDescMatchesEtcd: the KV service registered here has the
// methods etcd's generated registration has, plus the server-streaming
// RangeStream.
func TestKVServiceDescMatchesEtcd(t *testing.T) {
	etcd := grpc.NewServer()
	pb.RegisterKVServer(etcd, &pb.UnimplementedKVServer{})
	ours := grpc.NewServer()
	ours.RegisterService(kvServiceDesc(), &kvService{})
	want := append(methodShapes(etcd.GetServiceInfo()["etcdserverpb.KV"]), "RangeStream server")
	slices.Sort(want)
	if got := methodShapes(ours.GetServiceInfo()["etcdserverpb.KV"]); !slices.Equal(got, want) {
		t.Fatalf("KV methods %v, want %v", got, want)
	}
}

// storeMember serves reads from a kvstore.Store, without Raft.
type storeMember struct {
	Member // nil; only the methods below are called
	s      *kvstore.Store
}

func (m storeMember) ID() uint64        { return 0xaaa }
func (m storeMember) ClusterID() uint64 { return 0xccc }
func (m storeMember) Term() uint64      { return 7 }
func (m storeMember) Rev() int64        { return m.s.Rev() }
func (m storeMember) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	return m.s.Range(r)
}

// streamingMember adds RangeStream.
type streamingMember struct{ storeMember }

func (m streamingMember) RangeStream(ctx context.Context, r *pb.RangeRequest, chunkBytes int, send func(*pb.RangeResponse) error) error {
	return m.s.RangeStream(ctx, r, chunkBytes, send)
}

func newStreamConn(t *testing.T, m Member, chunkBytes int) *grpc.ClientConn {
	t.Helper()
	return serveInMemory(t, func(gs *grpc.Server) {
		gs.RegisterService(kvServiceDesc(), &kvService{srv: m, hdr: headerFiller{srv: m}, chunkBytes: chunkBytes})
	})
}

// TestRangeStreamService: over gRPC, the merged chunks are Range's
// response, header included; the request is validated as Range's; a sort
// order and a member without RangeStream are Unimplemented.
func TestRangeStreamService(t *testing.T) {
	b := memory.New()
	t.Cleanup(func() { b.Close() })
	s, err := kvstore.Open(b, kvstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := range 200 {
		if _, err := kvstoretest.Exec(s, &pb.PutRequest{Key: fmt.Appendf(nil, "k%03d", i), Value: []byte(strings.Repeat("v", i*10))}); err != nil {
			t.Fatal(err)
		}
	}
	m := streamingMember{storeMember{s: s}}
	conn := newStreamConn(t, m, 4096)
	ctx := testCtx(t)
	kv := pb.NewKVClient(conn)
	for _, req := range []*pb.RangeRequest{
		{Key: []byte("k"), RangeEnd: []byte("l")},
		{Key: []byte("k"), RangeEnd: []byte("l"), Limit: 33, KeysOnly: true},
		{Key: []byte("k"), RangeEnd: []byte("l"), CountOnly: true},
		{Key: []byte("k100")},
		{Key: []byte("x"), RangeEnd: []byte("y")},
	} {
		want, err := kv.Range(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		st, err := rangestream.Open(ctx, conn, req)
		if err != nil {
			t.Fatal(err)
		}
		got := &pb.RangeResponse{}
		chunks := 0
		err = st.ForEach(func(c *pb.RangeResponse) error {
			chunks++
			rangestream.Merge(got, c)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("%v: merged stream %v, want %v", req, got, want)
		}
		if req.Limit == 0 && !req.CountOnly && len(req.RangeEnd) > 0 && len(want.Kvs) > 0 && chunks < 10 {
			t.Fatalf("%v: %d chunks for %d bytes at 4096 a chunk", req, chunks, want.Size())
		}
	}
	_, err = rangestream.Get(ctx, conn, &pb.RangeRequest{})
	wantStatus(t, err, rpctypes.ErrGRPCEmptyKey)
	_, err = rangestream.Get(ctx, conn, &pb.RangeRequest{Key: []byte("k"), SortOrder: pb.RangeRequest_DESCEND})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("sort: got %v, want Unimplemented", err)
	}
	_, err = rangestream.Get(ctx, conn, &pb.RangeRequest{Key: []byte("k"), Revision: s.Rev() + 1})
	wantStatus(t, err, rpctypes.ErrGRPCFutureRev)
	_, err = rangestream.Get(ctx, newStreamConn(t, m.storeMember, 4096), &pb.RangeRequest{Key: []byte("k")})
	wantStatus(t, err, errRangeStreamUnimplemented)
}
