package linearizability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The watch checker: watchers follow the clients' keys while the nemesis
// runs, hopping from member to member, and their record is held against
// the full event history at the end (checkWatchers) in the terms of
// etcd's robustness suite:
//
//	ordered       events arrive in revision order
//	unique        no event arrives twice
//	atomic        a revision's events arrive in one response
//	bookmarkable  after a progress notification at revision R no event
//	              with revision <= R arrives
//	reliable      no event between the first and the last one delivered
//	              is missing
//	resumable     a watch resumed from any delivered revision (an event's,
//	              or a progress notification's) on any member continues
//	              exactly
//
// Reliable and resumable are checked together: a watcher's events,
// concatenated over all its streams, must equal the history from its
// start revision to the last revision it saw. Ordered and unique follow
// from that equality; the checks name them apart for a clearer failure.

const (
	// watchersCount watchers run beside the clients.
	watchersCount = 3
	// hopMin and hopMax bound how long a watcher stays on one member
	// before it cancels its stream and resumes on the next one.
	hopMin = 500 * time.Millisecond
	hopMax = 4 * time.Second
	// progressEvery is how often a watcher asks for a progress
	// notification.
	progressEvery = 300 * time.Millisecond
	// watchPrefix is where the clients' keys live (see client.go).
	watchPrefix = "/lin/"
)

// watchResponse is one response a watcher received.
type watchResponse struct {
	member   string
	events   []*mvccpb.Event
	progress bool  // a progress notification
	revision int64 // the header's revision
}

// watcher follows watchPrefix from revision 1, resuming on another
// member whenever its stream ends, breaks or has lasted its hop.
type watcher struct {
	id        int
	endpoints []string
	names     []string
	conns     []*grpc.ClientConn
	rng       *rand.Rand

	next    int64 // the revision to resume from
	resps   []watchResponse
	resumes int
	// clusterID is the cluster's ID; a stream whose responses carry
	// another came from a foreign server on a killed member's port: its
	// responses are dropped and the stream abandoned (foreign counts them).
	clusterID uint64
	foreign   int
}

func newWatcher(id int, names, endpoints []string, clusterID, seed uint64) (*watcher, error) {
	w := &watcher{id: id, names: names, endpoints: endpoints, next: 1, clusterID: clusterID,
		rng: rand.New(rand.NewPCG(seed, uint64(1000+id)))}
	for _, ep := range endpoints {
		conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			w.close()
			return nil, fmt.Errorf("watcher %d: dial %s: %w", id, ep, err)
		}
		w.conns = append(w.conns, conn)
	}
	return w, nil
}

func (w *watcher) close() {
	for _, c := range w.conns {
		c.Close()
	}
}

// run watches until ctx ends, hopping between members. A stream that
// cannot be opened (a member killed or paused) is retried on the next
// member after failureBackoff.
func (w *watcher) run(ctx context.Context) {
	for i := w.id; ctx.Err() == nil; i++ {
		m := i % len(w.conns)
		hop := hopMin + time.Duration(w.rng.Int64N(int64(hopMax-hopMin)))
		hctx, cancel := context.WithTimeout(ctx, hop)
		err := w.follow(hctx, m)
		cancel()
		w.resumes++
		if err != nil && ctx.Err() == nil {
			sleepCtx(ctx, failureBackoff)
		}
	}
}

// follow runs one stream on member m from w.next until ctx ends or the
// stream fails.
func (w *watcher) follow(ctx context.Context, m int) error {
	// Ending the stream's context on return also ends askProgress,
	// which the deferred receive waits for.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewWatchClient(w.conns[m]).Watch(ctx)
	if err != nil {
		return err
	}
	create := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte(watchPrefix), RangeEnd: prefixEnd(watchPrefix), StartRevision: w.next,
	}}}
	if err := stream.Send(create); err != nil {
		return err
	}
	sendErr := make(chan error, 1)
	go func() { sendErr <- askProgress(ctx, stream) }()
	defer func() { cancel(); <-sendErr }()
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if id := resp.Header.GetClusterId(); id != w.clusterID {
			w.foreign++
			return fmt.Errorf("%s answered for cluster %x, not %x: a foreign server", w.names[m], id, w.clusterID)
		}
		if resp.Created {
			continue
		}
		if resp.Canceled {
			return fmt.Errorf("watch canceled on %s: %s (compact revision %d)", w.names[m], resp.CancelReason, resp.CompactRevision)
		}
		r := watchResponse{member: w.names[m], events: resp.Events, revision: resp.Header.GetRevision()}
		r.progress = len(resp.Events) == 0 && resp.CompactRevision == 0 && r.revision != 0
		w.resps = append(w.resps, r)
		if n := len(resp.Events); n > 0 {
			w.next = max(w.next, resp.Events[n-1].Kv.ModRevision+1)
		} else if r.progress {
			// Resume after the bookmark, as Kubernetes does: a
			// notification ahead of the delivered events shows up as a
			// gap in the reliable check.
			w.next = max(w.next, r.revision+1)
		}
	}
}

// askProgress requests a progress notification every progressEvery until
// ctx ends; it then closes the send side.
func askProgress(ctx context.Context, stream pb.Watch_WatchClient) error {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := stream.Send(req); err != nil {
				return err
			}
		}
	}
}

func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	end[len(end)-1]++
	return end
}

// fullHistory reads every event from revision 1 through rev on the member
// at endpoint: it watches until a progress notification at rev or later
// arrives.
func fullHistory(ctx context.Context, endpoint string, clusterID uint64, rev int64) ([]*mvccpb.Event, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		return nil, err
	}
	create := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte(watchPrefix), RangeEnd: prefixEnd(watchPrefix), StartRevision: 1,
	}}}
	if err := stream.Send(create); err != nil {
		return nil, err
	}
	go askProgress(ctx, stream)
	var events []*mvccpb.Event
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("watch stream ended")
		}
		if err != nil {
			return nil, err
		}
		if id := resp.Header.GetClusterId(); id != clusterID {
			return nil, fmt.Errorf("%s answered for cluster %x, not %x: a foreign server", endpoint, id, clusterID)
		}
		if resp.Canceled {
			return nil, fmt.Errorf("watch canceled: %s", resp.CancelReason)
		}
		events = append(events, resp.Events...)
		if !resp.Created && len(resp.Events) == 0 && resp.Header.GetRevision() >= rev {
			return events, nil
		}
	}
}

// checkWatcher holds one watcher's record against the history; it
// returns every broken guarantee.
func checkWatcher(w *watcher, history []*mvccpb.Event) []error {
	var errs []error
	fail := func(format string, args ...any) {
		if len(errs) < 10 {
			errs = append(errs, fmt.Errorf("watcher %d: "+format, append([]any{w.id}, args...)...))
		}
	}
	perRev := map[int64]int{}
	for _, ev := range history {
		perRev[ev.Kv.ModRevision]++
	}
	var got []*mvccpb.Event
	var bookmark, last int64
	type keyRev struct {
		key string
		rev int64
	}
	seen := map[keyRev]bool{}
	for i, r := range w.resps {
		inResp := map[int64]int{}
		for _, ev := range r.events {
			rev := ev.Kv.ModRevision
			if rev < last {
				fail("ordered: response %d from %s has revision %d after %d", i, r.member, rev, last)
			}
			if rev <= bookmark {
				fail("bookmarkable: response %d from %s has revision %d after a progress notification at %d", i, r.member, rev, bookmark)
			}
			kr := keyRev{string(ev.Kv.Key), rev}
			if seen[kr] {
				fail("unique: %s at revision %d delivered twice (response %d from %s)", kr.key, rev, i, r.member)
			}
			seen[kr] = true
			inResp[rev]++
			last = rev
		}
		for rev, n := range inResp {
			if n != perRev[rev] {
				fail("atomic: response %d from %s has %d of revision %d's %d events", i, r.member, n, rev, perRev[rev])
			}
		}
		if r.progress {
			bookmark = max(bookmark, r.revision)
		}
		got = append(got, r.events...)
	}
	// Reliable and resumable: everything from revision 1 to the last one
	// delivered, exactly.
	var want []*mvccpb.Event
	for _, ev := range history {
		if ev.Kv.ModRevision <= last {
			want = append(want, ev)
		}
	}
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			fail("reliable: %d events missing, the first %s", len(want)-i, describe(want[i]))
		case i >= len(want):
			fail("reliable: %d events beyond the history, the first %s", len(got)-i, describe(got[i]))
		case !sameEvent(got[i], want[i]):
			fail("reliable: event %d is %s, the history has %s", i, describe(got[i]), describe(want[i]))
		default:
			continue
		}
		break
	}
	return errs
}

func sameEvent(a, b *mvccpb.Event) bool {
	return a.Type == b.Type && string(a.Kv.Key) == string(b.Kv.Key) && string(a.Kv.Value) == string(b.Kv.Value) &&
		a.Kv.ModRevision == b.Kv.ModRevision && a.Kv.CreateRevision == b.Kv.CreateRevision && a.Kv.Version == b.Kv.Version
}

func describe(ev *mvccpb.Event) string {
	return fmt.Sprintf("%s %s=%q at %d (created %d, version %d)", ev.Type, ev.Kv.Key, ev.Kv.Value,
		ev.Kv.ModRevision, ev.Kv.CreateRevision, ev.Kv.Version)
}
