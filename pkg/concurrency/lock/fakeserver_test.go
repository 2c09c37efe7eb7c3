package lock

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// fakeMember is just enough of an etcd member for one contender's lock:
// it grants leases, renews them, lets a contender join a queue (at the
// head, or behind a key that never leaves when behind is set) and delete
// its key, and accepts watches that never fire. Once frozen it answers
// nothing: every request waits for its caller to give up, as on a member
// stopped with SIGSTOP whose connection is still open.
type fakeMember struct {
	pb.UnimplementedKVServer
	pb.UnimplementedLeaseServer
	pb.UnimplementedWatchServer

	ttl    int64 // granted TTL, seconds
	behind bool  // a joining contender finds an older key ahead of it

	frozen   chan struct{} // closed by freeze
	freezeMu sync.Once
	joined   chan struct{} // closed when a join has been answered
	joinOnce sync.Once
	leases   atomic.Int64
}

func (m *fakeMember) freeze() { m.freezeMu.Do(func() { close(m.frozen) }) }

// stall blocks a request until the caller gives up, once frozen.
func (m *fakeMember) stall(ctx context.Context) error {
	select {
	case <-m.frozen:
		<-ctx.Done()
		return ctx.Err()
	default:
		return nil
	}
}

const fakeRev = 10

// aheadKey is the key that waits for ever ahead of a contender that
// joins behind.
var aheadKey = &mvccpb.KeyValue{Key: []byte("ahead"), CreateRevision: fakeRev - 5}

func (m *fakeMember) LeaseGrant(ctx context.Context, _ *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	if err := m.stall(ctx); err != nil {
		return nil, err
	}
	return &pb.LeaseGrantResponse{Header: &pb.ResponseHeader{Revision: fakeRev}, ID: m.leases.Add(1), TTL: m.ttl}, nil
}

func (m *fakeMember) LeaseRevoke(ctx context.Context, _ *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	if err := m.stall(ctx); err != nil {
		return nil, err
	}
	return &pb.LeaseRevokeResponse{Header: &pb.ResponseHeader{Revision: fakeRev}}, nil
}

func (m *fakeMember) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := m.stall(stream.Context()); err != nil {
			return err
		}
		if err := stream.Send(&pb.LeaseKeepAliveResponse{Header: &pb.ResponseHeader{Revision: fakeRev}, ID: req.ID, TTL: m.ttl}); err != nil {
			return err
		}
	}
}

func (m *fakeMember) Range(ctx context.Context, _ *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := m.stall(ctx); err != nil {
		return nil, err
	}
	return &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: fakeRev}, Kvs: []*mvccpb.KeyValue{aheadKey}, Count: 1}, nil
}

// Txn answers a join (a put and a read of the head) or an unlock (a
// delete).
func (m *fakeMember) Txn(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := m.stall(ctx); err != nil {
		return nil, err
	}
	resp := &pb.TxnResponse{Header: &pb.ResponseHeader{Revision: fakeRev}, Succeeded: true}
	if len(req.Success) == 0 || req.Success[0].GetRequestPut() == nil {
		resp.Responses = []*pb.ResponseOp{{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{Deleted: 1}}}}
		return resp, nil
	}
	var head []*mvccpb.KeyValue
	if m.behind {
		head = []*mvccpb.KeyValue{aheadKey}
	}
	resp.Responses = []*pb.ResponseOp{
		{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{}}},
		{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{Kvs: head, Count: int64(len(head))}}},
	}
	m.joinOnce.Do(func() { close(m.joined) })
	return resp, nil
}

// Watch confirms every watch it is asked for and never reports an event.
func (m *fakeMember) Watch(stream pb.Watch_WatchServer) error {
	var id int64
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		if req.GetCreateRequest() == nil {
			continue
		}
		id++
		if err := stream.Send(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: fakeRev}, WatchId: id, Created: true}); err != nil {
			return err
		}
	}
}

// startFakeMember serves m on a loopback port and returns a client bound
// to it; both end with the test.
func startFakeMember(t *testing.T, m *fakeMember) *clientv3.Client {
	t.Helper()
	m.frozen, m.joined = make(chan struct{}), make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterKVServer(srv, m)
	pb.RegisterLeaseServer(srv, m)
	pb.RegisterWatchServer(srv, m)
	go func() { _ = srv.Serve(ln) }()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ln.Addr().String()}, Logger: zap.NewNop()})
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.Close()
		srv.Stop()
	})
	return cli
}
