package etcdcompat

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/lease"
)

// fakeLeaseMember is a member with a lease table and no Raft: it answers
// the way the server does, with the lessor's errors.
type fakeLeaseMember struct {
	Member // nil; only the header methods below are called

	mu     sync.Mutex
	leases map[int64]int64    // ID -> granted TTL
	keys   map[int64][][]byte // ID -> attached keys
	nextID int64
	// renewErr, if set, is what LeaseRenew of renewErrID returns.
	renewErrID int64
	renewErr   error
}

func newFakeLeaseMember() *fakeLeaseMember {
	return &fakeLeaseMember{leases: map[int64]int64{}, keys: map[int64][][]byte{}, nextID: 100}
}

func (f *fakeLeaseMember) ID() uint64        { return 0xaaa }
func (f *fakeLeaseMember) ClusterID() uint64 { return 0xccc }
func (f *fakeLeaseMember) Term() uint64      { return 7 }
func (f *fakeLeaseMember) Rev() int64        { return 42 }

func (f *fakeLeaseMember) LeaseGrant(_ context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.TTL > lease.MaxTTL {
		return nil, lease.ErrLeaseTTLTooLarge
	}
	id := r.ID
	if id == 0 {
		f.nextID++
		id = f.nextID
	}
	if _, ok := f.leases[id]; ok {
		return nil, lease.ErrLeaseExists
	}
	f.leases[id] = r.TTL
	return &pb.LeaseGrantResponse{Header: &pb.ResponseHeader{}, ID: id, TTL: r.TTL}, nil
}

func (f *fakeLeaseMember) LeaseRevoke(_ context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.leases[r.ID]; !ok {
		return nil, lease.ErrLeaseNotFound
	}
	delete(f.leases, r.ID)
	return &pb.LeaseRevokeResponse{Header: &pb.ResponseHeader{Revision: 43}}, nil
}

func (f *fakeLeaseMember) LeaseRenew(_ context.Context, id int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == f.renewErrID && f.renewErr != nil {
		return -1, f.renewErr
	}
	ttl, ok := f.leases[id]
	if !ok {
		return -1, lease.ErrLeaseNotFound
	}
	return ttl, nil
}

func (f *fakeLeaseMember) LeaseTimeToLive(_ context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ttl, ok := f.leases[r.ID]
	if !ok {
		return nil, lease.ErrLeaseNotFound
	}
	resp := &pb.LeaseTimeToLiveResponse{Header: &pb.ResponseHeader{}, ID: r.ID, TTL: ttl - 1, GrantedTTL: ttl}
	if r.Keys {
		resp.Keys = f.keys[r.ID]
	}
	return resp, nil
}

func (f *fakeLeaseMember) LeaseLeases(context.Context, *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &pb.LeaseLeasesResponse{Header: &pb.ResponseHeader{}}
	for _, id := range slices.Sorted(mapKeys(f.leases)) {
		resp.Leases = append(resp.Leases, &pb.LeaseStatus{ID: id})
	}
	return resp, nil
}

func mapKeys(m map[int64]int64) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// newLeaseClient serves the Lease service for m over an in-memory
// connection.
func newLeaseClient(t *testing.T, m *fakeLeaseMember) pb.LeaseClient {
	t.Helper()
	return pb.NewLeaseClient(serveInMemory(t, func(gs *grpc.Server) {
		pb.RegisterLeaseServer(gs, newLeaseService(m, headerFiller{srv: m}, slog.New(slog.DiscardHandler)))
	}))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wantStatus checks err is exactly etcd's status want (code and message).
func wantStatus(t *testing.T, err, want error) {
	t.Helper()
	got, _ := status.FromError(err)
	exp, _ := status.FromError(want)
	if err == nil || got.Code() != exp.Code() || got.Message() != exp.Message() {
		t.Fatalf("error %v, want %v", err, want)
	}
}

func checkHeader(t *testing.T, h *pb.ResponseHeader, rev int64) {
	t.Helper()
	if h == nil || h.ClusterId != 0xccc || h.MemberId != 0xaaa || h.RaftTerm != 7 || h.Revision != rev {
		t.Fatalf("header %+v, want cluster ccc member aaa term 7 revision %d", h, rev)
	}
}

func TestLeaseGrantAndRevoke(t *testing.T) {
	m := newFakeLeaseMember()
	c := newLeaseClient(t, m)
	ctx := testCtx(t)

	resp, err := c.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 30})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != 101 || resp.TTL != 30 {
		t.Fatalf("grant = %+v", resp)
	}
	checkHeader(t, resp.Header, 42)

	_, err = c.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 101, TTL: 5})
	wantStatus(t, err, rpctypes.ErrGRPCLeaseExist)
	_, err = c.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 5, TTL: lease.MaxTTL + 1})
	wantStatus(t, err, rpctypes.ErrGRPCLeaseTTLTooLarge)

	rresp, err := c.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 101})
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, rresp.Header, 43) // the revoke's own revision is kept
	_, err = c.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 101})
	wantStatus(t, err, rpctypes.ErrGRPCLeaseNotFound)
}

func TestLeaseTimeToLive(t *testing.T) {
	m := newFakeLeaseMember()
	m.leases[7] = 60
	m.keys[7] = [][]byte{[]byte("a"), []byte("b")}
	c := newLeaseClient(t, m)
	ctx := testCtx(t)

	resp, err := c.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 7, Keys: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != 7 || resp.TTL != 59 || resp.GrantedTTL != 60 || len(resp.Keys) != 2 {
		t.Fatalf("TimeToLive = %+v", resp)
	}
	checkHeader(t, resp.Header, 42)

	// An unknown lease is not an error: TTL -1.
	resp, err = c.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 8})
	if err != nil {
		t.Fatalf("TimeToLive of unknown lease: %v", err)
	}
	if resp.ID != 8 || resp.TTL != -1 || resp.GrantedTTL != 0 {
		t.Fatalf("TimeToLive of unknown lease = %+v, want ID 8 TTL -1", resp)
	}
	checkHeader(t, resp.Header, 42)
}

func TestLeaseLeases(t *testing.T) {
	m := newFakeLeaseMember()
	m.leases[3], m.leases[1] = 10, 10
	c := newLeaseClient(t, m)
	resp, err := c.LeaseLeases(testCtx(t), &pb.LeaseLeasesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Leases) != 2 || resp.Leases[0].ID != 1 || resp.Leases[1].ID != 3 {
		t.Fatalf("leases %v", resp.Leases)
	}
	checkHeader(t, resp.Header, 42)
}

func TestLeaseKeepAlive(t *testing.T) {
	m := newFakeLeaseMember()
	m.leases[7] = 60
	m.renewErrID, m.renewErr = 9, membererr.ErrNoLeader
	c := newLeaseClient(t, m)
	stream, err := c.LeaseKeepAlive(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, ttl int64 }{
		{7, 60},
		{8, 0}, // unknown: TTL 0, and the stream goes on
		{7, 60},
	} {
		if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: c.id}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.ID != c.id || resp.TTL != c.ttl {
			t.Fatalf("keep-alive of %d = %+v, want TTL %d", c.id, resp, c.ttl)
		}
		checkHeader(t, resp.Header, 42)
	}
	// Any other renewal error ends the stream with etcd's status.
	if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: 9}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantStatus(t, err, rpctypes.ErrGRPCNoLeader)
}

func TestLeaseKeepAliveEndsOnCloseSend(t *testing.T) {
	m := newFakeLeaseMember()
	m.leases[7] = 5
	c := newLeaseClient(t, m)
	stream, err := c.LeaseKeepAlive(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseSend: %v, want io.EOF (a clean end)", err)
	}
}

func TestLeaseErrorMapping(t *testing.T) {
	for _, c := range []struct{ in, want error }{
		{lease.ErrLeaseNotFound, rpctypes.ErrGRPCLeaseNotFound},
		{lease.ErrLeaseExists, rpctypes.ErrGRPCLeaseExist},
		{lease.ErrLeaseTTLTooLarge, rpctypes.ErrGRPCLeaseTTLTooLarge},
		{membererr.ErrTimeout, rpctypes.ErrGRPCTimeout},
	} {
		wantStatus(t, toLeaseGRPCError(c.in), c.want)
	}
}
