package etcdcompat

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gw "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/metastore-io/metastore/pkg/concurrency/v3electionpb"
	"github.com/metastore-io/metastore/pkg/concurrency/v3lockpb"
)

// The services' behaviour on a real store is tested end to end in
// test/sdk, against MetaStore and etcd. These tests cover what is wired
// here: the JSON gateway routes and the in-process loopback.

// fakeLockServer answers Lock and Unlock with canned values and records
// the requests it got.
type fakeLockServer struct {
	lockReqs   chan *v3lockpb.LockRequest
	unlockReqs chan *v3lockpb.UnlockRequest
}

func (f *fakeLockServer) Lock(_ context.Context, r *v3lockpb.LockRequest) (*v3lockpb.LockResponse, error) {
	f.lockReqs <- r
	if string(r.Name) == "fail" {
		return nil, status.Error(codes.FailedPrecondition, "cannot lock")
	}
	return &v3lockpb.LockResponse{Header: &pb.ResponseHeader{Revision: 9, MemberId: 3}, Key: []byte(string(r.Name) + "/694d")}, nil
}

func (f *fakeLockServer) Unlock(_ context.Context, r *v3lockpb.UnlockRequest) (*v3lockpb.UnlockResponse, error) {
	f.unlockReqs <- r
	return &v3lockpb.UnlockResponse{Header: &pb.ResponseHeader{Revision: 10}}, nil
}

// gatewayFixture serves gs on an in-memory listener and returns an HTTP
// handler running the given gateway registrations against it, with the
// marshaler options of ClientServer.gateway.
func gatewayFixture(t *testing.T, gs *grpc.Server, register ...func(context.Context, *gw.ServeMux, *grpc.ClientConn) error) http.Handler {
	t.Helper()
	l := bufconn.Listen(1 << 20)
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	mux := gw.NewServeMux(gw.WithMarshalerOption(gw.MIMEWildcard, &gw.HTTPBodyMarshaler{
		Marshaler: &gw.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		},
	}))
	for _, r := range register {
		if err := r(context.Background(), mux, conn); err != nil {
			t.Fatal(err)
		}
	}
	return mux
}

// postJSON sends body to path and returns the status and the body, with
// JSON spaces removed for comparison.
func postJSON(t *testing.T, h http.Handler, path, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	out, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, strings.NewReplacer(" ", "", "\n", "").Replace(string(out))
}

func TestLockGateway(t *testing.T) {
	fake := &fakeLockServer{lockReqs: make(chan *v3lockpb.LockRequest, 4), unlockReqs: make(chan *v3lockpb.UnlockRequest, 4)}
	gs := grpc.NewServer()
	v3lockpb.RegisterLockServer(gs, fake)
	h := gatewayFixture(t, gs, registerLockGateway)

	code, body := postJSON(t, h, "/v3/lock/lock", `{"name":"Zm9v","lease":"12"}`)
	if code != http.StatusOK || body != `{"header":{"member_id":"3","revision":"9"},"key":"Zm9vLzY5NGQ="}` {
		t.Fatalf("lock: %d %s", code, body)
	}
	if r := <-fake.lockReqs; string(r.Name) != "foo" || r.Lease != 12 {
		t.Fatalf("lock request reached the service as %v", r)
	}
	code, body = postJSON(t, h, "/v3/lock/unlock", `{"key":"Zm9vLzY5NGQ="}`)
	if code != http.StatusOK || body != `{"header":{"revision":"10"}}` {
		t.Fatalf("unlock: %d %s", code, body)
	}
	if r := <-fake.unlockReqs; string(r.Key) != "foo/694d" {
		t.Fatalf("unlock request reached the service as %v", r)
	}
	// gRPC errors map to HTTP as in every gateway route.
	code, body = postJSON(t, h, "/v3/lock/lock", `{"name":"ZmFpbA=="}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "cannotlock") {
		t.Fatalf("failing lock: %d %s", code, body)
	}
	<-fake.lockReqs
	code, _ = postJSON(t, h, "/v3/lock/lock", `{"name":`)
	if code != http.StatusBadRequest {
		t.Fatalf("malformed JSON: %d, want 400", code)
	}
}

// TestCoordinationLoopback: the in-process client reaches the gRPC server
// the services are registered on. That server has no KV service here, so a
// Lock travels service -> client -> loopback -> server and comes back as
// the server's "unknown service" answer.
func TestCoordinationLoopback(t *testing.T) {
	c, err := newCoordination(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	c.register(gs)
	c.serve(gs)
	defer gs.Stop()
	defer c.close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = NewLockServer(c.client).Lock(ctx, &v3lockpb.LockRequest{Name: []byte("l"), Lease: 1})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "etcdserverpb.KV") {
		t.Fatalf("Lock through the loopback without a KV service = %v, want Unimplemented etcdserverpb.KV", err)
	}
	// The services are registered on gs under etcd's names.
	info := gs.GetServiceInfo()
	for _, name := range []string{"v3lockpb.Lock", "v3electionpb.Election"} {
		if _, ok := info[name]; !ok {
			t.Errorf("service %s not registered; have %v", name, info)
		}
	}
	if m := info["v3electionpb.Election"].Methods; len(m) != 5 {
		t.Errorf("Election methods = %v, want 5", m)
	}
	var _ v3electionpb.ElectionServer = NewElectionServer(c.client)
}
