package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// watchStream is a raw etcd watch stream (below clientv3, which hides the
// protocol's details) with its responses read into a channel.
type watchStream struct {
	t      *testing.T
	stream pb.Watch_WatchClient
	resps  chan *pb.WatchResponse
	errc   chan error
}

func openWatch(ctx context.Context, t *testing.T, s *server) *watchStream {
	t.Helper()
	st, err := pb.NewWatchClient(s.cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatalf("open watch stream: %v", err)
	}
	ws := &watchStream{t: t, stream: st, resps: make(chan *pb.WatchResponse, 256), errc: make(chan error, 1)}
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				ws.errc <- err
				return
			}
			ws.resps <- r
		}
	}()
	return ws
}

func (ws *watchStream) send(req *pb.WatchRequest) {
	ws.t.Helper()
	if err := ws.stream.Send(req); err != nil {
		ws.t.Fatalf("send watch request: %v", err)
	}
}

func (ws *watchStream) create(req *pb.WatchCreateRequest) {
	ws.t.Helper()
	ws.send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: req}})
}

func (ws *watchStream) cancel(id int64) {
	ws.t.Helper()
	ws.send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
}

func (ws *watchStream) requestProgress() {
	ws.t.Helper()
	ws.send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
}

func (ws *watchStream) recv() *pb.WatchResponse {
	ws.t.Helper()
	select {
	case r := <-ws.resps:
		return r
	case err := <-ws.errc:
		ws.t.Fatalf("watch stream failed: %v", err)
	case <-time.After(30 * time.Second):
		ws.t.Fatal("no watch response within 30s")
	}
	return nil
}

// created checks a successful creation response and returns its ID.
func (ws *watchStream) created(wantRev int64) int64 {
	ws.t.Helper()
	r := ws.recv()
	requireHeader(ws.t, r.Header, wantRev)
	if !r.Created || r.Canceled {
		ws.t.Fatalf("got %v, want a created response", r)
	}
	return r.WatchId
}

// events reads responses of watch id until it has n events, and returns
// them in order. Any other response fails the test.
func (ws *watchStream) events(id int64, n int) []*mvccpb.Event {
	ws.t.Helper()
	var evs []*mvccpb.Event
	for len(evs) < n {
		r := ws.recv()
		if r.WatchId != id || r.Created || r.Canceled || len(r.Events) == 0 {
			ws.t.Fatalf("got %v while waiting for %d events of watch %d", r, n-len(evs), id)
		}
		if last := r.Events[len(r.Events)-1].Kv.ModRevision; r.Header.Revision < last {
			ws.t.Fatalf("header revision %d below the last event's %d", r.Header.Revision, last)
		}
		evs = append(evs, r.Events...)
	}
	return evs
}

// describeEvents renders events as "PUT k@rev=v", "DELETE k@rev".
func describeEvents(evs []*mvccpb.Event) string {
	parts := make([]string, len(evs))
	for i, ev := range evs {
		parts[i] = fmt.Sprintf("%s %s@%d", ev.Type, ev.Kv.Key, ev.Kv.ModRevision)
		if ev.Type == mvccpb.PUT {
			parts[i] += "=" + string(ev.Kv.Value)
		}
		if ev.PrevKv != nil {
			parts[i] += fmt.Sprintf(" (prev %s@%d=%s)", ev.PrevKv.Key, ev.PrevKv.ModRevision, ev.PrevKv.Value)
		}
	}
	return strings.Join(parts, ", ")
}

func requireEvents(t *testing.T, evs []*mvccpb.Event, want string) {
	t.Helper()
	if got := describeEvents(evs); got != want {
		t.Fatalf("got events\n  %s\nwant\n  %s", got, want)
	}
}

func TestWatchCreateCancelAndRefusals(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "a", "0") // 2
	ws := openWatch(ctx, t, s)

	ws.create(&pb.WatchCreateRequest{Key: []byte("a")})
	if id := ws.created(2); id != 0 {
		t.Fatalf("first watch ID %d, want 0", id)
	}
	ws.create(&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 7, PrevKv: true})
	if id := ws.created(2); id != 7 {
		t.Fatalf("chosen watch ID %d, want 7", id)
	}
	ws.create(&pb.WatchCreateRequest{Key: []byte("b")})
	if id := ws.created(2); id != 1 {
		t.Fatalf("second automatic watch ID %d, want 1", id)
	}
	for _, tc := range []struct {
		req    *pb.WatchCreateRequest
		reason string
	}{
		{&pb.WatchCreateRequest{Key: []byte("a"), WatchId: 7}, "mvcc: duplicate watch ID provided on the WatchStream"},
		{&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: -1}, "etcdserver: mvcc: required revision has been compacted"},
		{&pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte("a")}, "mvcc: watcher range is empty"},
		{&pb.WatchCreateRequest{Key: []byte("b"), RangeEnd: []byte("b")}, "mvcc: watcher range is empty"},
	} {
		ws.create(tc.req)
		r := ws.recv()
		requireHeader(t, r.Header, 2)
		if r.WatchId != -1 || !r.Created || !r.Canceled || r.CancelReason != tc.reason || len(r.Events) != 0 {
			t.Fatalf("got %v, want watch -1 created and canceled: %q", r, tc.reason)
		}
	}

	mustPut(ctx, t, s.cli, "a", "1") // 3
	got := map[int64]string{}
	for range 2 {
		r := ws.recv()
		requireHeader(t, r.Header, 3)
		got[r.WatchId] = describeEvents(r.Events)
	}
	if got[0] != "PUT a@3=1" || got[7] != "PUT a@3=1 (prev a@2=0)" {
		t.Fatalf("got %v, want the put for watches 0 and 7, with prev_kv for 7", got)
	}

	ws.cancel(0)
	r := ws.recv()
	requireHeader(t, r.Header, 3)
	if r.WatchId != 0 || !r.Canceled || r.Created || r.CancelReason != "" {
		t.Fatalf("got %v, want watch 0 canceled", r)
	}
	// Canceling an unknown watch is answered with nothing: the next
	// response is the next creation's.
	ws.cancel(99)
	ws.create(&pb.WatchCreateRequest{Key: []byte("c"), WatchId: 99})
	if id := ws.created(3); id != 99 {
		t.Fatalf("watch ID %d, want 99", id)
	}
	mustPut(ctx, t, s.cli, "a", "2") // 4: only watch 7 is left on "a"
	if r := ws.recv(); r.WatchId != 7 || len(r.Events) != 1 {
		t.Fatalf("got %v, want only watch 7's event", r)
	}
}

func TestWatchRangesAndFilters(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	ws := openWatch(ctx, t, s)
	reqs := []*pb.WatchCreateRequest{
		{Key: []byte("k/"), RangeEnd: []byte("k0")}, // 0: prefix
		{Key: []byte("k/b"), RangeEnd: []byte{0}},   // 1: from key
		{RangeEnd: []byte{0}},                       // 2: everything
		{Key: []byte("k/a"), Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}},    // 3
		{Key: []byte("k/a"), Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}}, // 4
	}
	for i, req := range reqs {
		ws.create(req)
		if id := ws.created(1); id != int64(i) {
			t.Fatalf("watch ID %d, want %d", id, i)
		}
	}
	mustPut(ctx, t, s.cli, "k/a", "1") // 2
	mustPut(ctx, t, s.cli, "k/b", "1") // 3
	mustPut(ctx, t, s.cli, "z", "1")   // 4
	if _, err := s.cli.Delete(ctx, "k/a"); err != nil {
		t.Fatal(err)
	} // 5
	want := map[int64]string{
		0: "PUT k/a@2=1, PUT k/b@3=1, DELETE k/a@5",
		1: "PUT k/b@3=1, PUT z@4=1",
		2: "PUT k/a@2=1, PUT k/b@3=1, PUT z@4=1, DELETE k/a@5",
		3: "DELETE k/a@5",
		4: "PUT k/a@2=1",
	}
	counts := map[int64]int{0: 3, 1: 2, 2: 4, 3: 1, 4: 1}
	got := map[int64][]*mvccpb.Event{}
	total := 0
	for total < 11 {
		r := ws.recv()
		got[r.WatchId] = append(got[r.WatchId], r.Events...)
		total += len(r.Events)
	}
	for id, w := range want {
		if len(got[id]) != counts[id] || describeEvents(got[id]) != w {
			t.Fatalf("watch %d got %s, want %s", id, describeEvents(got[id]), w)
		}
	}
}

func TestWatchTxnInOneResponse(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	ws := openWatch(ctx, t, s)
	ws.create(&pb.WatchCreateRequest{Key: []byte("t"), RangeEnd: []byte("u")})
	id := ws.created(1)
	if _, err := s.cli.Txn(ctx).Then(clientv3.OpPut("t1", "a"), clientv3.OpPut("t2", "b"), clientv3.OpPut("x", "c")).Commit(); err != nil {
		t.Fatal(err)
	}
	r := ws.recv()
	requireHeader(t, r.Header, 2)
	if r.WatchId != id || describeEvents(r.Events) != "PUT t1@2=a, PUT t2@2=b" {
		t.Fatalf("got %v, want both puts of the transaction in one response", r)
	}
}

func TestWatchHistoryAndCompaction(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	for i := range 5 {
		mustPut(ctx, t, s.cli, fmt.Sprintf("h%d", i), "v") // 2..6
	}
	if _, err := s.cli.Delete(ctx, "h0"); err != nil { // 7
		t.Fatal(err)
	}
	if _, err := s.cli.Compact(ctx, 5); err != nil {
		t.Fatal(err)
	}
	ws := openWatch(ctx, t, s)

	// From the compacted revision itself: everything from it on.
	ws.create(&pb.WatchCreateRequest{Key: []byte("h"), RangeEnd: []byte("i"), StartRevision: 5})
	id := ws.created(7)
	requireEvents(t, ws.events(id, 3), "PUT h3@5=v, PUT h4@6=v, DELETE h0@7")

	// From below it: created, then canceled with the compact revision
	// and a header revision of 0, as etcd does.
	ws.create(&pb.WatchCreateRequest{Key: []byte("h"), RangeEnd: []byte("i"), StartRevision: 3, WatchId: 50})
	ws.created(7)
	r := ws.recv()
	if r.WatchId != 50 || !r.Canceled || r.CompactRevision != 5 || len(r.Events) != 0 || r.Header.Revision != 0 || r.Header.ClusterId == 0 {
		t.Fatalf("got %v, want watch 50 canceled at compact revision 5 with header revision 0", r)
	}
	// The compacted watch keeps its ID until the client cancels it.
	ws.create(&pb.WatchCreateRequest{Key: []byte("h"), WatchId: 50})
	if r := ws.recv(); r.WatchId != -1 || !r.Canceled {
		t.Fatalf("got %v, want the duplicate ID refused", r)
	}
	ws.cancel(50)
	if r := ws.recv(); r.WatchId != 50 || !r.Canceled || r.CompactRevision != 0 {
		t.Fatalf("got %v, want watch 50 canceled", r)
	}

	// clientv3 reports the compaction as an error on the channel.
	wch := s.cli.Watch(ctx, "h", clientv3.WithPrefix(), clientv3.WithRev(2))
	resp := <-wch
	if !errors.Is(resp.Err(), rpctypes.ErrCompacted) || resp.CompactRevision != 5 {
		t.Fatalf("got err %v compact %d, want %v at 5", resp.Err(), resp.CompactRevision, rpctypes.ErrCompacted)
	}
}

func TestWatchProgress(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{ExtraFlags: []string{"--watch-progress-notify-interval=200ms"}})
	ctx := testContext(t, testTimeout)
	mustPut(ctx, t, s.cli, "other", "1") // 2
	ws := openWatch(ctx, t, s)

	// A stream-wide request: watch ID -1 and the current revision.
	ws.create(&pb.WatchCreateRequest{Key: []byte("p")})
	ws.created(2)
	mustPut(ctx, t, s.cli, "other", "2") // 3
	ws.requestProgress()
	r := ws.recv()
	requireHeader(t, r.Header, 3)
	if r.WatchId != -1 || r.Created || r.Canceled || len(r.Events) != 0 {
		t.Fatalf("got %v, want a progress notification", r)
	}

	// A watch with progress_notify hears, under its own ID, every
	// interval in which nothing happened on its keys.
	ws.create(&pb.WatchCreateRequest{Key: []byte("q"), ProgressNotify: true, WatchId: 9})
	ws.created(3)
	r = ws.recv()
	requireHeader(t, r.Header, 3)
	if r.WatchId != 9 || len(r.Events) != 0 || r.Canceled {
		t.Fatalf("got %v, want a periodic progress notification for watch 9", r)
	}

	// clientv3's RequestProgress reaches every watch channel.
	wch := s.cli.Watch(ctx, "x")
	if err := s.cli.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	if resp := <-wch; !resp.IsProgressNotify() || resp.Header.Revision != 3 {
		t.Fatalf("got %+v, want a progress notification at revision 3", resp)
	}
}

func TestWatchFragment(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	// Three values of 1 MiB, read back in one response by a watch that
	// starts in the past: above the 1.5 MiB + 512 KiB limit.
	big := bytes.Repeat([]byte("f"), 1<<20)
	for i := range 3 {
		mustPut(ctx, t, s.cli, fmt.Sprintf("f%d", i), string(big)) // 2..4
	}
	ws := openWatch(ctx, t, s)
	ws.create(&pb.WatchCreateRequest{Key: []byte("f"), RangeEnd: []byte("g"), StartRevision: 2, Fragment: true})
	id := ws.created(4)
	const limit = 1.5*1024*1024 + 512*1024
	var keys []string
	for len(keys) < 3 {
		r := ws.recv()
		if r.WatchId != id {
			t.Fatalf("got %v", r)
		}
		if r.Size() >= limit && len(r.Events) > 1 {
			t.Fatalf("a fragment of %d bytes with %d events exceeds the limit", r.Size(), len(r.Events))
		}
		for _, ev := range r.Events {
			keys = append(keys, string(ev.Kv.Key))
		}
		if r.Fragment != (len(keys) < 3) {
			t.Fatalf("response with %d of 3 events has fragment=%v", len(keys), r.Fragment)
		}
	}
	if strings.Join(keys, ",") != "f0,f1,f2" {
		t.Fatalf("got keys %v", keys)
	}
	// clientv3 puts the fragments back together.
	wch := s.cli.Watch(ctx, "f", clientv3.WithPrefix(), clientv3.WithRev(2), clientv3.WithFragment())
	if resp := <-wch; resp.Err() != nil || len(resp.Events) != 3 {
		t.Fatalf("got %d events, err %v; want the 3 events in one watch response", len(resp.Events), resp.Err())
	}
}

// TestWatchManyOnOneStream puts many watches with overlapping ranges on
// one clientv3 stream and checks each gets exactly its keys, in order.
func TestWatchManyOnOneStream(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	const watches, writes = 40, 60
	chans := make([]clientv3.WatchChan, watches)
	for i := range chans {
		// Watch i covers m/<i>... to the end: each write to m/<j> reaches
		// the watches i <= j.
		chans[i] = s.cli.Watch(ctx, fmt.Sprintf("m/%02d", i), clientv3.WithFromKey(), clientv3.WithCreatedNotify())
		if r := <-chans[i]; !r.Created {
			t.Fatalf("watch %d: got %+v, want created", i, r)
		}
	}
	for w := range writes {
		mustPut(ctx, t, s.cli, fmt.Sprintf("m/%02d", w%watches), fmt.Sprint(w))
	}
	for i, ch := range chans {
		var want []string
		for w := range writes {
			if w%watches >= i {
				want = append(want, fmt.Sprintf("m/%02d=%d", w%watches, w))
			}
		}
		var got []string
		for len(got) < len(want) {
			r := <-ch
			if r.Err() != nil {
				t.Fatalf("watch %d: %v", i, r.Err())
			}
			for _, ev := range r.Events {
				got = append(got, fmt.Sprintf("%s=%s", ev.Kv.Key, ev.Kv.Value))
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("watch %d got %v, want %v", i, got, want)
		}
	}
}
