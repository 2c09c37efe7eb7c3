package etcdcompat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"
)

func TestWatchServiceCreateEventsCancel(t *testing.T) {
	f := startWatchService(t, 1.5*1024*1024)
	f.write(map[string][]byte{"a": []byte("0")}) // 2
	rw := f.open(t)
	rw.create(&pb.WatchCreateRequest{Key: []byte("a"), PrevKv: true})
	r := rw.recv()
	wantHeader(t, r, 2)
	if !r.Created || r.Canceled || r.WatchId != 0 {
		t.Fatalf("got %v, want watch 0 created", r)
	}
	rev := f.write(map[string][]byte{"a": []byte("1")})
	r = rw.recv()
	wantHeader(t, r, rev)
	if r.WatchId != 0 || len(r.Events) != 1 || r.Events[0].Kv.ModRevision != rev || r.Events[0].PrevKv == nil || string(r.Events[0].PrevKv.Value) != "0" {
		t.Fatalf("got %v, want the put at %d with its previous value", r, rev)
	}
	rw.cancel(0)
	r = rw.recv()
	wantHeader(t, r, rev)
	if r.WatchId != 0 || !r.Canceled || r.Created || r.CancelReason != "" {
		t.Fatalf("got %v, want watch 0 canceled", r)
	}
	// Cancel of an unknown watch: nothing. The next response is the
	// answer to the following creation.
	rw.cancel(42)
	rw.create(&pb.WatchCreateRequest{Key: []byte("b"), WatchId: 5})
	if r := rw.recv(); !r.Created || r.WatchId != 5 {
		t.Fatalf("got %v, want watch 5 created", r)
	}
}

func TestWatchServiceRefusals(t *testing.T) {
	f := startWatchService(t, 1.5*1024*1024)
	rw := f.open(t)
	rw.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 3})
	rw.recv()
	for _, tc := range []struct {
		req    *pb.WatchCreateRequest
		reason string
	}{
		{&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 3}, "mvcc: duplicate watch ID provided on the WatchStream"},
		{&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: -1}, "etcdserver: mvcc: required revision has been compacted"},
		{&pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte("a")}, "mvcc: watcher range is empty"},
	} {
		rw.create(tc.req)
		r := rw.recv()
		wantHeader(t, r, 1)
		if r.WatchId != -1 || !r.Created || !r.Canceled || r.CancelReason != tc.reason {
			t.Fatalf("got %v, want watch -1 created and canceled with %q", r, tc.reason)
		}
	}
}

func TestWatchServiceProgressAndCompaction(t *testing.T) {
	f := startWatchService(t, 1.5*1024*1024)
	for i := range 4 {
		f.write(map[string][]byte{"a": []byte(fmt.Sprint(i))}) // 2..5
	}
	f.hist.mu.Lock()
	f.hist.compact = 4
	f.hist.mu.Unlock()
	rw := f.open(t)
	rw.create(&pb.WatchCreateRequest{Key: []byte("a")})
	rw.recv()
	rw.progress()
	r := rw.recv()
	wantHeader(t, r, 5)
	if r.WatchId != -1 || r.Created || r.Canceled || len(r.Events) != 0 {
		t.Fatalf("got %v, want a progress notification", r)
	}
	rw.create(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: 2})
	if r := rw.recv(); !r.Created || r.WatchId != 1 {
		t.Fatalf("got %v, want watch 1 created", r)
	}
	r = rw.recv()
	// etcd leaves the header revision of a compaction cancel at 0.
	wantHeader(t, r, 0)
	if r.WatchId != 1 || !r.Canceled || r.CompactRevision != 4 {
		t.Fatalf("got %v, want watch 1 canceled at compact revision 4", r)
	}
}

func TestWatchServiceFragments(t *testing.T) {
	const maxRequestBytes = 1024 // split from 1024 + 512 KiB
	f := startWatchService(t, maxRequestBytes)
	rw := f.open(t)
	rw.create(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l"), Fragment: true})
	rw.recv()
	rw.create(&pb.WatchCreateRequest{Key: []byte("k"), RangeEnd: []byte("l")})
	rw.recv()
	big := bytes.Repeat([]byte("v"), 300*1024)
	f.write(map[string][]byte{"k1": big, "k2": big, "k3": big, "k4": []byte("small")})
	var fragments []*pb.WatchResponse
	var whole *pb.WatchResponse
	for whole == nil || len(fragments) == 0 || fragments[len(fragments)-1].Fragment {
		r := rw.recv()
		if r.WatchId == 1 {
			whole = r
			continue
		}
		fragments = append(fragments, r)
	}
	if len(whole.Events) != 4 || whole.Fragment {
		t.Fatalf("watch without fragment got %d events (fragment %v), want all 4 in one response", len(whole.Events), whole.Fragment)
	}
	// 300 KiB events against a 525 KiB limit: one per fragment, the
	// small one riding with the last.
	var layout []string
	for _, r := range fragments {
		var keys []string
		for _, ev := range r.Events {
			keys = append(keys, string(ev.Kv.Key))
		}
		layout = append(layout, fmt.Sprintf("%s/%v", strings.Join(keys, "+"), r.Fragment))
		wantHeader(t, r, 2)
	}
	if got := strings.Join(layout, " "); got != "k1/true k2/true k3+k4/false" {
		t.Fatalf("fragments %s, want k1/true k2/true k3+k4/false", got)
	}
}

func TestSendFragmentsMatchesEtcd(t *testing.T) {
	// etcd's algorithm, measuring the message after each event.
	etcdSplit := func(wr *pb.WatchResponse, limit int) []string {
		if wr.Size() < limit || len(wr.Events) < 2 {
			return []string{fmt.Sprint(len(wr.Events), false)}
		}
		var out []string
		idx := 0
		for {
			cur := *wr
			cur.Events, cur.Fragment = nil, true
			for _, ev := range wr.Events[idx:] {
				cur.Events = append(cur.Events, ev)
				if len(cur.Events) > 1 && cur.Size() >= limit {
					cur.Events = cur.Events[:len(cur.Events)-1]
					break
				}
				idx++
			}
			if idx == len(wr.Events) {
				cur.Fragment = false
			}
			out = append(out, fmt.Sprint(len(cur.Events), cur.Fragment))
			if !cur.Fragment {
				return out
			}
		}
	}
	for _, sizes := range [][]int{{10}, {10, 10}, {100, 100, 100}, {500, 1, 1, 1, 500}, {1000, 2000, 10, 10}, {60, 60, 60, 60, 60, 60}} {
		for _, limit := range []int{50, 128, 200, 400, 1000, 5000} {
			wr := &pb.WatchResponse{Header: &pb.ResponseHeader{ClusterId: 1, MemberId: 2, Revision: 99, RaftTerm: 3}, WatchId: 4}
			for i, n := range sizes {
				wr.Events = append(wr.Events, &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte(fmt.Sprint("k", i)), Value: make([]byte, n), ModRevision: 99}})
			}
			want := etcdSplit(wr, limit)
			var got []string
			err := sendFragments(wr, limit, func(r *pb.WatchResponse) error {
				got = append(got, fmt.Sprint(len(r.Events), r.Fragment))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("sizes %v limit %d: got %v, want %v", sizes, limit, got, want)
			}
		}
	}
}

// TestWatchServiceClientv3 drives the service with etcd's own client:
// prefix watch, prev_kv, fragment reassembly, progress requests and the
// compaction error as clientv3 reports it.
func TestWatchServiceClientv3(t *testing.T) {
	f := startWatchService(t, 1024)
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	cli := clientv3.NewCtxClient(ctx)
	defer cli.Close()
	cli.Watcher = clientv3.NewWatchFromWatchClient(pb.NewWatchClient(f.conn), cli)

	wch := cli.Watch(ctx, "k", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithFragment(), clientv3.WithCreatedNotify())
	if r := <-wch; !r.Created || r.Err() != nil {
		t.Fatalf("got %+v, want the created notification", r)
	}
	big := bytes.Repeat([]byte("v"), 300*1024)
	rev := f.write(map[string][]byte{"k1": big, "k2": big, "k3": big})
	r := <-wch
	if r.Err() != nil || len(r.Events) != 3 || r.Header.Revision != rev {
		t.Fatalf("got %d events, err %v; want the 3 events of revision %d reassembled", len(r.Events), r.Err(), rev)
	}
	f.write(map[string][]byte{"k1": nil})
	r = <-wch
	if len(r.Events) != 1 || r.Events[0].Type != mvccpb.DELETE || r.Events[0].PrevKv == nil || len(r.Events[0].PrevKv.Value) != len(big) {
		t.Fatalf("got %+v, want the delete with its previous value", r.Events)
	}
	if err := cli.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-wch; !r.IsProgressNotify() || r.Header.Revision != rev+1 {
		t.Fatalf("got %+v, want a progress notification at %d", r, rev+1)
	}

	f.hist.mu.Lock()
	f.hist.compact = rev
	f.hist.mu.Unlock()
	old := cli.Watch(ctx, "k", clientv3.WithPrefix(), clientv3.WithRev(1))
	r = <-old
	if !errors.Is(r.Err(), rpctypes.ErrCompacted) || r.CompactRevision != rev {
		t.Fatalf("got err %v compact %d, want %v at %d", r.Err(), r.CompactRevision, rpctypes.ErrCompacted, rev)
	}
}

// TestWatchServiceStreamLifetime checks that a half-closed stream keeps
// delivering (as etcd's does) and that the hub forgets a stream when the
// client goes away.
func TestWatchServiceStreamLifetime(t *testing.T) {
	f := startWatchService(t, 1.5*1024*1024)
	rw := f.open(t)
	rw.create(&pb.WatchCreateRequest{Key: []byte("a")})
	rw.recv()
	if err := rw.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	rev := f.write(map[string][]byte{"a": []byte("1")})
	if r := rw.recv(); len(r.Events) != 1 || r.Events[0].Kv.ModRevision != rev {
		t.Fatalf("got %v after CloseSend, want the event", r)
	}
	if n := gaugeValue(t, f.metrics, "etcd_debugging_mvcc_watch_stream_total"); n != 1 {
		t.Fatalf("%v streams, want 1", n)
	}
	f.conn.Close()
	select {
	case err := <-f.ended:
		if !errors.Is(err, rpctypes.ErrGRPCWatchCanceled) {
			t.Fatalf("Watch returned %v, want %v", err, rpctypes.ErrGRPCWatchCanceled)
		}
	case <-time.After(watchTimeout):
		t.Fatal("Watch did not return after the client went away")
	}
	if n := gaugeValue(t, f.metrics, "etcd_debugging_mvcc_watch_stream_total"); n != 0 {
		t.Fatalf("%v streams after the client left, want 0", n)
	}
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestWatchServiceHubClosed(t *testing.T) {
	f := startWatchService(t, 1.5*1024*1024)
	rw := f.open(t)
	rw.create(&pb.WatchCreateRequest{Key: []byte("a")})
	rw.recv()
	f.hub.Close()
	select {
	case err := <-rw.errc:
		requireStatus(t, err, rpctypes.ErrGRPCStopped)
	case <-time.After(watchTimeout):
		t.Fatal("the stream did not end when the hub closed")
	}
}

// requireStatus checks a gRPC error's code and message.
func requireStatus(t *testing.T, err, want error) {
	t.Helper()
	got, _ := status.FromError(err)
	exp, _ := status.FromError(want)
	if got.Code() != exp.Code() || got.Message() != exp.Message() {
		t.Fatalf("got %v, want %v", err, want)
	}
}

// TestWatchServiceSharedEvents has several streams send the same shared
// events concurrently (run with -race: marshaling must only read them).
func TestWatchServiceSharedEvents(t *testing.T) {
	f := startWatchService(t, 1.5*1024*1024)
	const streams, writes = 4, 50
	rws := make([]*rawWatch, streams)
	for i := range rws {
		rws[i] = f.open(t)
		rws[i].create(&pb.WatchCreateRequest{Key: []byte("s"), RangeEnd: []byte("t"), PrevKv: i%2 == 0})
		rws[i].recv()
	}
	for i := range writes {
		f.write(map[string][]byte{fmt.Sprintf("s%d", i%5): []byte(fmt.Sprint(i))})
	}
	for i, rw := range rws {
		var revs []int64
		for len(revs) < writes {
			for _, ev := range rw.recv().Events {
				revs = append(revs, ev.Kv.ModRevision)
			}
		}
		for j, r := range revs {
			if r != int64(j+2) {
				t.Fatalf("stream %d: event %d at revision %d, want %d", i, j, r, j+2)
			}
		}
	}
}
