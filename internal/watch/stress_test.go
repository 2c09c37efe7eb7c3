package watch

import (
	"context"
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

	createdRev   int64
	responses    []Response // event responses, in order
	compactRev   int64      // canceled for compaction at this revision
	canceled     bool       // the canceled response arrived
	afterCancel  []Response // anything that arrived after it (must stay empty)
	cancelAsked  bool
	eventsSeen   int
	lastEventRev int64
}

// stressStream is one stream of the stress test and its consumer.
type stressStream struct {
	s       *Stream
	slow    bool
	mu      sync.Mutex
	watches map[int64]*watchSpec
	done    chan struct{} // closed when the consumer saw the final progress
	err     error
}

func (ss *stressStream) spec(id int64) *watchSpec {
	w := ss.watches[id]
	if w == nil {
		w = &watchSpec{}
		ss.watches[id] = w
	}
	return w
}

// consume reads the stream until a progress notification at or above
// *final (once set) arrives.
func (ss *stressStream) consume(ctx context.Context, gate <-chan struct{}, final *atomic.Int64) {
	defer close(ss.done)
	if ss.slow {
		select {
		case <-gate:
		case <-ctx.Done():
			ss.err = ctx.Err()
			return
		}
	}
	var buf []Response
	for {
		var err error
		buf, err = ss.s.Next(ctx, buf[:0])
		if err != nil {
			ss.err = err
			return
		}
		for _, r := range buf {
			if r.WatchID == InvalidWatchID && !r.Created {
				if f := final.Load(); f > 0 && r.Revision >= f {
					return
				}
				continue
			}
			ss.record(r)
		}
	}
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
// while 8 writers commit puts, deletes and transactions; the store is
// compacted half way and one stream is not read until the writes are
// over. Every watch must then have received exactly what the final
// history says it should: in revision order, whole revisions per
// response, no gap, no duplicate, nothing after its cancel.
func TestStress(t *testing.T) {
	const (
		streams       = 8
		initial       = 900 // watches created before the writes
		during        = 100 // watches created while they run
		writers       = 8
		opsPerWriter  = 250
		compactLagRev = 150
	)
	hist := newMemHistory()
	h := testHub(t, hist, Options{StreamBufferBytes: 16 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(7, 11))
	keyOf := func(i int) string { return fmt.Sprintf("k%d%d", i/10%10, i%10) }

	// Seed some history so that watches can start in the past.
	for i := range 100 {
		hist.commit(put(keyOf(i), "seed"))
	}
	h.Publish(hist.Rev(), nil)

	var final atomic.Int64
	gate := make(chan struct{})
	ss := make([]*stressStream, streams)
	for i := range ss {
		ss[i] = &stressStream{s: h.NewStream(), slow: i == 0, watches: make(map[int64]*watchSpec), done: make(chan struct{})}
		t.Cleanup(ss[i].s.Close)
		go ss[i].consume(ctx, gate, &final)
	}
	var createMu sync.Mutex // guards rng while creating
	create := func(pastRev int64) {
		createMu.Lock()
		st := ss[rng.IntN(streams)]
		k := rng.IntN(100)
		req := &pb.WatchCreateRequest{}
		switch rng.IntN(6) {
		case 0, 1:
			req.Key = []byte(keyOf(k))
		case 2:
			req.Key, req.RangeEnd = []byte(keyOf(k)[:2]), []byte(keyOf(k)[:1]+string(rune(keyOf(k)[1]+1)))
		case 3:
			req.Key, req.RangeEnd = []byte("k"), []byte("l")
		case 4:
			req.Key, req.RangeEnd = []byte(keyOf(k)), []byte{0}
		case 5:
			req.Key, req.RangeEnd = []byte(keyOf(k)), []byte(keyOf(min(k+rng.IntN(30)+1, 99))+"\x00")
		}
		if rng.IntN(4) == 0 && pastRev > 0 {
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

	// The applier: commits the writers' operations one revision each,
	// publishing several revisions at a time when they queue up, and
	// compacts half way.
	ops := make(chan []op, 64)
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		total, compacted := 0, false
		for {
			first, ok := <-ops
			if !ok {
				return
			}
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
			total += len(batch)
			if !compacted && total >= writers*opsPerWriter/2 {
				compacted = true
				hist.compactAt(hist.Rev() - compactLagRev)
			}
		}
	}()
	var wg sync.WaitGroup
	for wr := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(wr), 99))
			for i := range opsPerWriter {
				var o []op
				switch r.IntN(4) {
				case 0, 1:
					o = []op{put(keyOf(r.IntN(100)), fmt.Sprintf("w%d-%d", wr, i))}
				case 2:
					o = []op{del(keyOf(r.IntN(100)))}
				case 3:
					base := r.IntN(90)
					for j := range 2 + r.IntN(3) {
						if r.IntN(3) == 0 {
							o = append(o, del(keyOf(base+j*3)))
						} else {
							o = append(o, put(keyOf(base+j*3), fmt.Sprintf("t%d-%d", wr, i)))
						}
					}
				}
				select {
				case ops <- o:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range during {
			create(hist.Rev())
		}
	}()
	wg.Wait()
	close(ops)
	<-applied
	final.Store(hist.Rev())
	close(gate)

	// Ask every stream for progress until it reports the final revision.
	for _, st := range ss {
		tick := time.NewTicker(20 * time.Millisecond)
	wait:
		for {
			st.s.RequestProgress()
			select {
			case <-st.done:
				break wait
			case <-tick.C:
			case <-ctx.Done():
				t.Fatalf("stream never reported progress at revision %d", final.Load())
			}
		}
		tick.Stop()
		if st.err != nil {
			t.Fatalf("consumer: %v", st.err)
		}
	}

	compactRev := hist.CompactRev()
	checked, compactedWatches, canceledWatches := 0, 0, 0
	for _, st := range ss {
		st.mu.Lock()
		for id, w := range st.watches {
			checkStressWatch(t, id, w, hist, compactRev)
			checked++
			if w.compactRev != 0 {
				compactedWatches++
			}
			if w.cancelAsked {
				canceledWatches++
			}
		}
		st.mu.Unlock()
	}
	if checked != initial+during {
		t.Fatalf("checked %d watches, want %d", checked, initial+during)
	}
	if compactedWatches == 0 || canceledWatches == 0 {
		t.Fatalf("the run must exercise compaction and cancel: %d compacted, %d canceled", compactedWatches, canceledWatches)
	}
	t.Logf("final revision %d, compacted at %d; %d watches compacted, %d canceled by their client",
		final.Load(), compactRev, compactedWatches, canceledWatches)
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
