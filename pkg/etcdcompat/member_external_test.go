package etcdcompat_test

// This file is a program outside MetaStore's internals: it serves etcd's
// API over its own member, a single-node map, with nothing but this
// package's exported API and etcd's public types. If the API ever named
// an internal type again, this would stop compiling.

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// mapMember is a one-member "cluster" over a map: enough etcd semantics
// for Put, Range of one key and Watch of one key from now on.
type mapMember struct {
	mu       sync.Mutex
	rev      int64
	kvs      map[string]*mvccpb.KeyValue
	watchers []*mapWatchStream
}

var _ etcdcompat.Member = (*mapMember)(nil)

func newMapMember() *mapMember { return &mapMember{rev: 1, kvs: map[string]*mvccpb.KeyValue{}} }

func (m *mapMember) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{Revision: m.rev}
}

func (m *mapMember) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(r.RangeEnd) > 0 {
		return nil, status.Error(codes.Unimplemented, "ranges are not supported")
	}
	resp := &pb.RangeResponse{Header: m.header()}
	if kv := m.kvs[string(r.Key)]; kv != nil {
		resp.Kvs, resp.Count = []*mvccpb.KeyValue{kv}, 1
	}
	return resp, nil
}

func (m *mapMember) Put(_ context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rev++
	kv := &mvccpb.KeyValue{Key: r.Key, Value: r.Value, CreateRevision: m.rev, ModRevision: m.rev, Version: 1}
	if prev := m.kvs[string(r.Key)]; prev != nil {
		kv.CreateRevision, kv.Version = prev.CreateRevision, prev.Version+1
	}
	m.kvs[string(r.Key)] = kv
	for _, w := range m.watchers {
		w.publish(m.rev, &mvccpb.Event{Type: mvccpb.PUT, Kv: kv})
	}
	return &pb.PutResponse{Header: m.header()}, nil
}

func (m *mapMember) DeleteRange(context.Context, *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "delete is not supported")
}

func (m *mapMember) Txn(context.Context, *pb.TxnRequest) (*pb.TxnResponse, error) {
	return nil, status.Error(codes.Unimplemented, "txn is not supported")
}

func (m *mapMember) Compact(context.Context, *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	return nil, status.Error(codes.Unimplemented, "compaction is not supported")
}

func (m *mapMember) LinearizableRead(context.Context) error { return nil }

func (m *mapMember) HashKV(int64) (etcdcompat.HashKVResult, error) {
	return etcdcompat.HashKVResult{Revision: m.Rev(), CompactRevision: -1, HashRevision: m.Rev()}, nil
}

func (m *mapMember) Hash() (uint32, error)            { return 0, nil }
func (m *mapMember) Defragment(context.Context) error { return nil }

func (m *mapMember) Snapshot(context.Context) (etcdcompat.SnapshotImage, error) {
	return nil, status.Error(codes.Unimplemented, "snapshots are not supported")
}

func (m *mapMember) Status() etcdcompat.MemberStatus {
	return etcdcompat.MemberStatus{Leader: m.ID(), Term: m.Term()}
}

func (m *mapMember) Alarm(context.Context, *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return &pb.AlarmResponse{Header: &pb.ResponseHeader{}}, nil
}

func (m *mapMember) Alarms() []*pb.AlarmMember { return nil }

func (m *mapMember) Members() []*membershippb.Member {
	return []*membershippb.Member{{ID: m.ID(), MemberAttributes: &membershippb.Attributes{Name: "map"}}}
}

func (m *mapMember) ID() uint64        { return 0x1 }
func (m *mapMember) ClusterID() uint64 { return 0xc }
func (m *mapMember) Term() uint64      { return 1 }

func (m *mapMember) Rev() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rev
}

func (m *mapMember) LeaseGrant(context.Context, *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	return nil, status.Error(codes.Unimplemented, "leases are not supported")
}

func (m *mapMember) LeaseRevoke(context.Context, *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	return nil, rpctypes.ErrGRPCLeaseNotFound
}

func (m *mapMember) LeaseRenew(context.Context, int64) (int64, error) {
	return 0, rpctypes.ErrGRPCLeaseNotFound
}

func (m *mapMember) LeaseTimeToLive(context.Context, *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	return nil, rpctypes.ErrGRPCLeaseNotFound
}

func (m *mapMember) LeaseLeases(context.Context, *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	return &pb.LeaseLeasesResponse{Header: &pb.ResponseHeader{}}, nil
}

func (m *mapMember) NewWatchStream() etcdcompat.WatchStream {
	w := &mapWatchStream{m: m, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	m.mu.Lock()
	m.watchers = append(m.watchers, w)
	m.mu.Unlock()
	return w
}

func (m *mapMember) MemberAdd(context.Context, []string, bool) (*membershippb.Member, []*membershippb.Member, error) {
	return nil, nil, status.Error(codes.Unimplemented, "membership changes are not supported")
}

func (m *mapMember) MemberRemove(context.Context, uint64) ([]*membershippb.Member, error) {
	return nil, rpctypes.ErrGRPCMemberNotFound
}

func (m *mapMember) MemberUpdate(context.Context, uint64, []string) ([]*membershippb.Member, error) {
	return nil, rpctypes.ErrGRPCMemberNotFound
}

func (m *mapMember) MemberPromote(context.Context, uint64) ([]*membershippb.Member, error) {
	return nil, rpctypes.ErrGRPCMemberNotFound
}

func (m *mapMember) MoveLeader(context.Context, uint64) error {
	return rpctypes.ErrGRPCBadLeaderTransferee
}
func (m *mapMember) Leader() uint64                 { return m.ID() }
func (m *mapMember) IsLearner() bool                { return false }
func (m *mapMember) ElectionTimeout() time.Duration { return time.Second }

// mapWatchStream watches single keys from the next revision on.
type mapWatchStream struct {
	m      *mapMember
	wake   chan struct{}
	closed chan struct{}

	mu     sync.Mutex // after mapMember.mu
	nextID int64
	keys   map[int64][]byte
	queue  []etcdcompat.WatchResponse
}

func (w *mapWatchStream) push(r etcdcompat.WatchResponse) {
	w.queue = append(w.queue, r)
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *mapWatchStream) publish(rev int64, ev *mvccpb.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, key := range w.keys {
		if bytes.Equal(key, ev.Kv.Key) {
			w.push(etcdcompat.WatchResponse{WatchID: id, Revision: rev, Events: []*mvccpb.Event{ev}})
		}
	}
}

func (w *mapWatchStream) Watch(req *pb.WatchCreateRequest) (int64, error) {
	rev := w.m.Rev()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys == nil {
		w.keys = map[int64][]byte{}
	}
	id := w.nextID
	w.nextID++
	w.keys[id] = req.Key
	w.push(etcdcompat.WatchResponse{WatchID: id, Revision: rev, Created: true})
	return id, nil
}

func (w *mapWatchStream) Cancel(id int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.keys[id]; !ok {
		return false
	}
	delete(w.keys, id)
	w.push(etcdcompat.WatchResponse{WatchID: id, Canceled: true})
	return true
}

func (w *mapWatchStream) RequestProgress() {}

func (w *mapWatchStream) Next(ctx context.Context, dst []etcdcompat.WatchResponse) ([]etcdcompat.WatchResponse, error) {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			dst = append(dst, w.queue...)
			w.queue = w.queue[:0]
			w.mu.Unlock()
			return dst, nil
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.closed:
			return dst, rpctypes.ErrGRPCStopped
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
}

func (w *mapWatchStream) Close() {
	m := w.m
	m.mu.Lock()
	for i, o := range m.watchers {
		if o == w {
			m.watchers = append(m.watchers[:i], m.watchers[i+1:]...)
			break
		}
	}
	m.mu.Unlock()
	close(w.closed)
}

// The official client talks to mapMember through etcdcompat as to etcd:
// a put is read back with etcd's header, a watch sees it, and an error
// the member returns as etcd's status reaches the client as etcd's.
func TestServeOverAMemberFromOutside(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := etcdcompat.NewClientServer(etcdcompat.Config{Member: newMapMember(), MaxRequestBytes: 1 << 20, MaxTxnOps: 128})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer func() {
		srv.Stop(ctx)
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{l.Addr().String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	wch := cli.Watch(ctx, "k", clientv3.WithCreatedNotify())
	if wr := <-wch; !wr.Created {
		t.Fatalf("first watch response %+v, want created", wr)
	}
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	got, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" || got.Header.Revision != 2 || got.Header.ClusterId != 0xc || got.Header.MemberId != 0x1 {
		t.Fatalf("Get: %+v", got)
	}
	select {
	case wr := <-wch:
		if len(wr.Events) != 1 || string(wr.Events[0].Kv.Value) != "v" || wr.Header.Revision != 2 {
			t.Fatalf("watch response %+v", wr)
		}
	case <-ctx.Done():
		t.Fatal("the watch saw no event")
	}
	if _, err := cli.Revoke(ctx, 7); err == nil || err.Error() != rpctypes.ErrLeaseNotFound.Error() {
		t.Fatalf("Revoke of an unknown lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
}
