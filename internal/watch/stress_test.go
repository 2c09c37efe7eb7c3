package watch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// watchSpec is a stress-test watch: what was asked and what the consumer
// saw.
type watchSpec struct {
	req         *pb.WatchCreateRequest
	cancelAfter int // the consumer cancels the watch after this many events (0: never)

	createdRev  int64
	responses   []Response // event responses, in order
	compactRev  int64      // canceled for compaction at this revision
	canceled    bool       // the canceled response arrived
	afterCancel []Response // anything that arrived after it (must stay empty)
	cancelAsked bool
	eventsSeen  int
}

// stressStream is one stream of the stress test and its consumer.
type stressStream struct {
	s        *Stream
	slow     bool // not read until the gate opens
	progress atomic.Int64
	// progressed is signaled after each progress notification.
	progressed chan struct{}
	done       chan struct{} // closed when the consumer stops
	err        error

	mu      sync.Mutex
	watches map[int64]*watchSpec
}

func (ss *stressStream) spec(id int64) *watchSpec {
	w := ss.watches[id]
	if w == nil {
		w = &watchSpec{}
		ss.watches[id] = w
	}
	return w
}

// consume reads the stream until ctx ends.
func (ss *stressStream) consume(ctx context.Context, gate <-chan struct{}) {
	defer close(ss.done)
	if ss.slow {
		select {
		case <-gate:
		case <-ctx.Done():
			return
		}
	}
	var buf []Response
	for {
		var err error
		buf, err = ss.s.Next(ctx, buf[:0])
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				ss.err = err
			}
			return
		}
		for _, r := range buf {
			if r.WatchID == InvalidWatchID && !r.Created {
				// Count it only once every cancel the consumer made
				// has been answered, so that the barrier covers them.
				if !ss.cancelsPending() {
					ss.progress.Store(r.Revision)
				}
				signal(ss.progressed)
				continue
			}
			ss.record(r)
		}
	}
}

// waitProgress asks the stream for progress until it reports rev: then
// every watch of the stream is synced and has been given everything up to
// rev.
func (ss *stressStream) waitProgress(ctx context.Context, t *testing.T, rev int64) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond) // re-ask: requests are dropped while watches lag
	defer tick.Stop()
	for ss.progress.Load() < rev {
		ss.s.RequestProgress()
		select {
		case <-ss.progressed:
		case <-tick.C:
		case <-ss.done:
			t.Fatalf("consumer stopped: %v", ss.err)
		case <-ctx.Done():
			t.Fatalf("stream never reported progress at revision %d", rev)
		}
	}
}

// cancelsPending reports whether the consumer canceled a watch and has
// not yet read the canceled response.
func (ss *stressStream) cancelsPending() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, w := range ss.watches {
		if (w.cancelAsked || w.compactRev != 0) && !w.canceled {
			return true
		}
	}
	return false
}

func (ss *stressStream) record(r Response) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	w := ss.spec(r.WatchID)
	switch {
	case w.canceled:
		w.afterCancel = append(w.afterCancel, r)
	case r.Created:
		w.createdRev = r.Revision
	case r.Canceled && r.CompactRevision != 0:
		w.compactRev = r.CompactRevision
		// As clientv3 does: cancel the watch so its ID is released.
		ss.s.Cancel(r.WatchID)
	case r.Canceled:
		w.canceled = true
	default:
		w.responses = append(w.responses, r)
		w.eventsSeen += len(r.Events)
		if w.cancelAfter > 0 && w.eventsSeen >= w.cancelAfter && !w.cancelAsked {
			w.cancelAsked = true
			ss.s.Cancel(r.WatchID)
		}
	}
}

// TestStress runs 1,000 watches over 8 streams with overlapping ranges
// while 8 writers commit puts, deletes and transactions. Half way the
// store is compacted; one stream is not read until the writes are over.
// Every watch must then have received exactly what the final history
// says it should: in revision order, whole revisions per response, no
// gap, no duplicate, nothing after its cancel; watches that fell below
// the compaction must have received a prefix of it and been told so.
func TestStress(t *testing.T) {
	const (
		streams      = 8
		initial      = 900 // watches created before the writes
		during       = 100 // watches created during the second half
		writers      = 8
		opsPerWriter = 250
	)
	hist := newMemHistory()
	h := testHub(t, hist, Options{StreamBufferBytes: 64 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(7, 11))
	keyOf := func(i int) string { return fmt.Sprintf("k%d%d", i/10%10, i%10) }

	// Seed some history so that watches can start in the past.
	for i := range 100 {
		hist.commit(put(keyOf(i), "seed"))
	}
	h.Publish(hist.Rev(), nil)

	gate := make(chan struct{})
	ss := make([]*stressStream, streams)
	for i := range ss {
		ss[i] = &stressStream{
			s: h.NewStream(), slow: i == 0, watches: make(map[int64]*watchSpec),
			progressed: make(chan struct{}, 1), done: make(chan struct{}),
		}
		t.Cleanup(ss[i].s.Close)
		// A watch that never fires keeps the stream from being empty,
		// which would stop it answering progress requests.
		if _, err := ss[i].s.Watch(&pb.WatchCreateRequest{Key: []byte("quiet"), WatchId: quietWatch}); err != nil {
			t.Fatal(err)
		}
		go ss[i].consume(ctx, gate)
	}
	defer func() {
		cancel()
		for _, st := range ss {
			<-st.done
		}
	}()
	var createMu sync.Mutex // guards rng
	create := func(pastRev int64) {
		createMu.Lock()
		st := ss[rng.IntN(streams)]
		k := rng.IntN(100)
		req := &pb.WatchCreateRequest{}
		switch n := rng.IntN(20); {
		case n < 10:
			req.Key = []byte(keyOf(k))
		case n < 15: // a prefix of 10 keys
			req.Key, req.RangeEnd = []byte(keyOf(k)[:2]), []byte(keyOf(k)[:1]+string(rune(keyOf(k)[1]+1)))
		case n < 18:
			req.Key, req.RangeEnd = []byte(keyOf(k)), []byte(keyOf(min(k+rng.IntN(30)+1, 99))+"\x00")
		case n < 19:
			req.Key, req.RangeEnd = []byte(keyOf(k)), []byte{0}
		default:
			req.Key, req.RangeEnd = []byte("k"), []byte("l")
		}
		if rng.IntN(4) == 0 {
			req.StartRevision = 1 + rng.Int64N(pastRev)
		}
		if rng.IntN(8) == 0 {
			req.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_FilterType(rng.IntN(2))}
		}
		cancelAfter := 0
		if rng.IntN(10) == 0 {
			cancelAfter = 1 + rng.IntN(20)
		}
		createMu.Unlock()
		st.mu.Lock()
		defer st.mu.Unlock()
		id, err := st.s.Watch(req)
		if err != nil {
			t.Errorf("watch: %v", err)
			return
		}
		w := st.spec(id)
		w.req, w.cancelAfter = req, cancelAfter
	}
	for range initial {
		create(hist.Rev())
	}

	// The applier commits the writers' operations one revision each and
	// publishes several revisions at once when they queue up.
	writeHalf := func(half int, alongside func()) int64 {
		ops := make(chan []op, 64)
		applied := make(chan struct{})
		go func() {
			defer close(applied)
			for first := range ops {
				batch := [][]op{first}
			more:
				for len(batch) < 4 {
					select {
					case o, ok := <-ops:
						if !ok {
							break more
						}
						batch = append(batch, o)
					default:
						break more
					}
				}
				var evs []mvccpb.Event
				for _, o := range batch {
					_, e := hist.commit(o...)
					evs = append(evs, e...)
				}
				h.Publish(hist.Rev(), evs)
			}
		}()
		var wg sync.WaitGroup
		for wr := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(wr), uint64(half)))
				for i := range opsPerWriter / 2 {
					select {
					case ops <- randomOps(r, keyOf, fmt.Sprintf("w%d-%d-%d", wr, half, i)):
					case <-ctx.Done():
						return
					}
				}
			}()
		}
		if alongside != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				alongside()
			}()
		}
		wg.Wait()
		close(ops)
		<-applied
		return hist.Rev()
	}

	mid := writeHalf(0, nil)
	for _, st := range ss[1:] {
		st.waitProgress(ctx, t, mid)
	}
	hist.compactAt(100 + (mid-100)/2)
	final := writeHalf(1, func() {
		for range during {
			create(hist.Rev())
		}
	})
	close(gate)
	for _, st := range ss {
		st.waitProgress(ctx, t, final)
	}

	compactRev := hist.CompactRev()
	checked, exact, compacted, canceled := 0, 0, 0, 0
	for _, st := range ss {
		st.mu.Lock()
		for id, w := range st.watches {
			if id == quietWatch {
				continue
			}
			checkStressWatch(t, id, w, hist, compactRev)
			checked++
			switch {
			case w.compactRev != 0:
				compacted++
			case w.cancelAsked:
				canceled++
			default:
				exact++
			}
		}
		st.mu.Unlock()
	}
	if checked != initial+during {
		t.Fatalf("checked %d watches, want %d", checked, initial+during)
	}
	if compacted == 0 || canceled == 0 || exact < initial/2 {
		t.Fatalf("the run must exercise compaction, cancel and full delivery: %d compacted, %d canceled, %d complete", compacted, canceled, exact)
	}
	t.Logf("final revision %d, compacted at %d; %d watches complete, %d compacted, %d canceled by their client",
		final, compactRev, exact, compacted, canceled)
}

// quietWatch is the ID of each stream's watch on a key nobody writes.
const quietWatch = 1 << 40

// randomOps returns one revision's worth of writes: a put, a delete, or a
// transaction over 2 to 4 distinct keys.
func randomOps(r *rand.Rand, keyOf func(int) string, value string) []op {
	switch r.IntN(4) {
	case 0, 1:
		return []op{put(keyOf(r.IntN(100)), value)}
	case 2:
		return []op{del(keyOf(r.IntN(100)))}
	}
	var o []op
	base := r.IntN(90)
	for j := range 2 + r.IntN(3) {
		if r.IntN(3) == 0 {
			o = append(o, del(keyOf(base+j*3)))
		} else {
			o = append(o, put(keyOf(base+j*3), value))
		}
	}
	return o
}

// checkStressWatch compares what a watch received with the history.
func checkStressWatch(t *testing.T, id int64, w *watchSpec, hist *memHistory, compactRev int64) {
	t.Helper()
	if w.req == nil || w.createdRev == 0 {
		t.Fatalf("watch %d: responses without a creation (created at %d)", id, w.createdRev)
	}
	if len(w.afterCancel) > 0 {
		t.Fatalf("watch %d: got %s after its canceled response", id, fmtResp(w.afterCancel[0]))
	}
	from := w.req.StartRevision
	if from == 0 {
		from = w.createdRev + 1
	}
	key, end := w.req.Key, normalizeEnd(w.req.RangeEnd)
	var filter eventFilter
	for _, f := range w.req.Filters {
		filter |= map[pb.WatchCreateRequest_FilterType]eventFilter{pb.WatchCreateRequest_NOPUT: filterNoPut, pb.WatchCreateRequest_NODELETE: filterNoDelete}[f]
	}
	var want []string
	hist.mu.Lock()
	for i := range hist.events {
		ev := &hist.events[i]
		if ev.Kv.ModRevision >= from && inRange(ev.Kv.Key, key, end) && !filter.drops(ev) {
			want = append(want, fmtEvent(ev))
		}
	}
	hist.mu.Unlock()
	var got []string
	last := int64(0)
	for _, r := range w.responses {
		first := r.Events[0].Kv.ModRevision
		if first <= last {
			t.Fatalf("watch %d: revision %d split across responses or out of order", id, first)
		}
		for _, ev := range r.Events {
			if ev.Kv.ModRevision < last {
				t.Fatalf("watch %d: events out of order", id)
			}
			last = ev.Kv.ModRevision
			got = append(got, fmtEvent(ev))
		}
		if r.Revision < last {
			t.Fatalf("watch %d: header revision %d below event revision %d", id, r.Revision, last)
		}
	}
	if w.compactRev == 0 && !w.cancelAsked {
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("watch %d (%q..%q from %d): got %d events, want %d\n got: %s\nwant: %s",
				id, key, w.req.RangeEnd, from, len(got), len(want), strings.Join(got, " "), strings.Join(want, " "))
		}
		return
	}
	// A compacted or canceled watch received a prefix of the history.
	if len(got) > len(want) || strings.Join(got, "\n") != strings.Join(want[:len(got)], "\n") {
		t.Fatalf("watch %d: got events that are not a prefix of the history\n got: %s\nwant: %s", id, strings.Join(got, " "), strings.Join(want, " "))
	}
	if w.compactRev != 0 {
		if w.compactRev != compactRev || last >= compactRev {
			t.Fatalf("watch %d: canceled for compaction at %d after an event at %d (store compacted at %d)", id, w.compactRev, last, compactRev)
		}
		if !w.canceled {
			t.Fatalf("watch %d: no canceled response after the client canceled the compacted watch", id)
		}
	}
	if w.cancelAsked && !w.canceled {
		t.Fatalf("watch %d: canceled by the client but never told so", id)
	}
}
