package etcdcompat

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/watch"
)

// The watch service tests' fixture: a hub over an in-memory history,
// the service on an in-process gRPC server, and raw client streams.

// watchTimeout bounds every wait of these tests.
const watchTimeout = 20 * time.Second

const (
	testClusterID = 0xc1
	testMemberID  = 0xe1
	testTerm      = 7
)

// testIdentity plays the member for the headers.
type testIdentity struct{}

func (testIdentity) ClusterID() uint64 { return testClusterID }
func (testIdentity) ID() uint64        { return testMemberID }
func (testIdentity) Term() uint64      { return testTerm }

// testHistory is an in-memory store history (kvstore.Store.Events
// semantics) that also writes, one revision per commit.
type testHistory struct {
	mu      sync.Mutex
	events  []mvccpb.Event
	rev     int64
	compact int64
	live    map[string]*mvccpb.KeyValue
}

func newTestHistory() *testHistory {
	return &testHistory{rev: 1, live: make(map[string]*mvccpb.KeyValue)}
}

// commit puts (value != nil) or deletes each key in one revision.
func (th *testHistory) commit(kvs map[string][]byte) (int64, []mvccpb.Event) {
	th.mu.Lock()
	defer th.mu.Unlock()
	rev := th.rev + 1
	keys := make([]string, 0, len(kvs))
	for k := range kvs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var evs []mvccpb.Event
	for _, k := range keys {
		v, prev := kvs[k], th.live[k]
		if v == nil {
			if prev != nil {
				delete(th.live, k)
				evs = append(evs, mvccpb.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(k), ModRevision: rev}})
			}
			continue
		}
		kv := &mvccpb.KeyValue{Key: []byte(k), Value: v, CreateRevision: rev, ModRevision: rev, Version: 1}
		if prev != nil {
			kv.CreateRevision, kv.Version = prev.CreateRevision, prev.Version+1
		}
		th.live[k] = kv
		evs = append(evs, mvccpb.Event{Type: mvccpb.PUT, Kv: kv})
	}
	if len(evs) > 0 {
		th.rev = rev
		th.events = append(th.events, evs...)
	}
	return th.rev, evs
}

func (th *testHistory) Rev() int64 {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.rev
}

func (th *testHistory) CompactRev() int64 {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.compact
}

func (th *testHistory) Events(startRev, endRev int64, key, rangeEnd []byte, limit int) ([]mvccpb.Event, int64, error) {
	th.mu.Lock()
	defer th.mu.Unlock()
	if startRev < th.compact {
		return nil, 0, kvstore.ErrCompacted
	}
	if endRev <= 0 || endRev > th.rev+1 {
		endRev = th.rev + 1
	}
	var out []mvccpb.Event
	for _, ev := range th.events {
		r := ev.Kv.ModRevision
		if r < startRev || r >= endRev {
			continue
		}
		if limit > 0 && len(out) >= limit && r != out[len(out)-1].Kv.ModRevision {
			return out, r, nil
		}
		k := ev.Kv.Key
		switch {
		case rangeEnd == nil && !bytes.Equal(k, key):
			continue
		case rangeEnd != nil && bytes.Compare(k, key) < 0:
			continue
		case len(rangeEnd) > 0 && !(len(rangeEnd) == 1 && rangeEnd[0] == 0) && bytes.Compare(k, rangeEnd) >= 0:
			continue
		}
		out = append(out, ev)
	}
	return out, max(endRev, startRev), nil
}

func (th *testHistory) PrevKV(key []byte, rev int64) (*mvccpb.KeyValue, error) {
	th.mu.Lock()
	defer th.mu.Unlock()
	if rev-1 < th.compact {
		return nil, kvstore.ErrCompacted
	}
	var prev *mvccpb.KeyValue
	for _, ev := range th.events {
		if ev.Kv.ModRevision >= rev {
			break
		}
		if bytes.Equal(ev.Kv.Key, key) {
			prev = nil
			if ev.Type == mvccpb.PUT {
				prev = ev.Kv
			}
		}
	}
	return prev, nil
}

// watchFixture is a Watch service on an in-process connection.
type watchFixture struct {
	hist    *testHistory
	hub     *watch.Hub
	conn    *grpc.ClientConn
	metrics *prometheus.Registry
	// ended receives what each Watch call returned.
	ended chan error
}

// reportingWatch reports the end of each Watch call.
type reportingWatch struct {
	*watchService
	ended chan<- error
}

func (r reportingWatch) Watch(stream pb.Watch_WatchServer) error {
	err := r.watchService.Watch(stream)
	r.ended <- err
	return err
}

func startWatchService(t testing.TB, maxRequestBytes uint) *watchFixture {
	t.Helper()
	return startWatchServiceWith(t, maxRequestBytes, watch.Options{})
}

// startWatchServiceWith starts the service over a hub with opts (the
// fixture sets ErrCompacted and Metrics).
func startWatchServiceWith(t testing.TB, maxRequestBytes uint, opts watch.Options) *watchFixture {
	t.Helper()
	f := &watchFixture{hist: newTestHistory(), metrics: prometheus.NewRegistry(), ended: make(chan error, 16)}
	opts.ErrCompacted, opts.Metrics = kvstore.ErrCompacted, f.metrics
	hub, err := watch.NewHub(f.hist, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.hub = hub
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(grpc.MaxSendMsgSize(math.MaxInt32))
	pb.RegisterWatchServer(gs, reportingWatch{newWatchService(hubStreams{hub}, testIdentity{}, maxRequestBytes, slog.New(slog.DiscardHandler)), f.ended})
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		t.Fatal(err)
	}
	f.conn = conn
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		hub.Close()
	})
	return f
}

// hubStreams serves the hub's streams as WatchStreams (as the member does).
type hubStreams struct{ hub *watch.Hub }

func (h hubStreams) NewWatchStream() WatchStream { return &hubStream{Stream: h.hub.NewStream()} }

type hubStream struct {
	*watch.Stream
	buf []watch.Response
}

func (s *hubStream) Next(ctx context.Context, dst []WatchResponse) ([]WatchResponse, error) {
	var err error
	s.buf, err = s.Stream.Next(ctx, s.buf[:0])
	for _, r := range s.buf {
		dst = append(dst, WatchResponse(r))
	}
	return dst, err
}

// write commits and publishes one revision.
func (f *watchFixture) write(kvs map[string][]byte) int64 {
	rev, evs := f.hist.commit(kvs)
	f.hub.Publish(rev, evs)
	return rev
}

// rawWatch is a raw etcd watch stream.
type rawWatch struct {
	t      *testing.T
	stream pb.Watch_WatchClient
	resps  chan *pb.WatchResponse
	errc   chan error
}

func (f *watchFixture) open(t *testing.T) *rawWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := pb.NewWatchClient(f.conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rw := &rawWatch{t: t, stream: st, resps: make(chan *pb.WatchResponse, 1024), errc: make(chan error, 1)}
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				rw.errc <- err
				return
			}
			rw.resps <- r
		}
	}()
	return rw
}

func (rw *rawWatch) create(req *pb.WatchCreateRequest) {
	rw.t.Helper()
	if err := rw.stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: req}}); err != nil {
		rw.t.Fatal(err)
	}
}

func (rw *rawWatch) cancel(id int64) {
	rw.t.Helper()
	if err := rw.stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}}); err != nil {
		rw.t.Fatal(err)
	}
}

func (rw *rawWatch) progress() {
	rw.t.Helper()
	if err := rw.stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}); err != nil {
		rw.t.Fatal(err)
	}
}

func (rw *rawWatch) recv() *pb.WatchResponse {
	rw.t.Helper()
	select {
	case r := <-rw.resps:
		return r
	case err := <-rw.errc:
		rw.t.Fatalf("watch stream failed: %v", err)
	case <-time.After(watchTimeout):
		rw.t.Fatal("no watch response")
	}
	return nil
}

// wantHeader checks the IDs and term etcd puts in every header, and the
// revision.
func wantHeader(t *testing.T, r *pb.WatchResponse, rev int64) {
	t.Helper()
	h := r.Header
	if h == nil || h.ClusterId != testClusterID || h.MemberId != testMemberID || h.RaftTerm != testTerm || h.Revision != rev {
		t.Fatalf("header %v, want cluster %x member %x term %d revision %d", h, testClusterID, testMemberID, testTerm, rev)
	}
}
