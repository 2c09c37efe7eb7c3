package watch

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Reasons etcd gives when it refuses to create a watch, sent as the
// response's cancel_reason. The texts are etcd's.
var (
	// ErrCompactedStart: a negative start_revision (etcd's rpctypes text).
	ErrCompactedStart = errors.New("etcdserver: mvcc: required revision has been compacted")
	// ErrEmptyRange: range_end at or below key.
	ErrEmptyRange = errors.New("mvcc: watcher range is empty")
	// ErrDuplicateID: a client-chosen watch_id already in use on the stream.
	ErrDuplicateID = errors.New("mvcc: duplicate watch ID provided on the WatchStream")
)

// InvalidWatchID is the watch_id of responses that belong to no watcher:
// refused creations and stream-wide progress notifications.
const InvalidWatchID = -1

// Response is one message for the client, in the order it must be sent.
// The gRPC layer adds the cluster and member IDs and the Raft term to the
// header.
type Response struct {
	WatchID int64
	// Revision is the header revision.
	Revision        int64
	Events          []*mvccpb.Event // shared with other streams: read only
	CompactRevision int64
	Created         bool
	Canceled        bool
	CancelReason    string
	// Fragment: the watcher asked for large responses to be split.
	Fragment bool
}

const (
	// nextBatch is how many responses Next takes at most, so that queued
	// bytes are released to the budget in steps while the client is slow.
	nextBatch = 64
)

// Stream is one client's set of watches: etcd's watch stream. Its
// responses are taken, in order, with Next.
type Stream struct {
	hub *Hub

	// Guarded by hub.mu.
	watchers       map[int64]*watcher
	nextID         int64
	lagging        []*watcher // lagging watchers
	lagSlot        int        // position in hub.lagStreams, -1 when absent
	lagCursor      int        // where the next catch-up round starts in lagging
	progressUsers  int        // watchers with progress_notify
	progressTimer  *time.Timer
	progressEvery  time.Duration
	progressAsked  int   // stream-wide progress requests not yet answered
	progressTarget int64 // the revision published when the last one came
	progressQueued bool  // the stream is in hub.progressQ
	gone           bool  // closed: no new watches
	// The fan-out's staging of the current chunk (see fanOut.stage).
	stagePass             uint64
	stageFirst, stageLast int32
	stageBytes            int

	// mu guards the outbox.
	mu      sync.Mutex
	queue   outbox
	bytes   int  // estimated size of the queued responses
	behind  bool // the stream has lagging watchers (mirror of len(lagging) > 0)
	closed  bool
	wake    chan struct{}
	pending int // events queued, for the pending-events gauge
}

type queued struct {
	resp   Response
	size   int
	prevKV bool
}

// NewStream opens a watch stream.
func (h *Hub) NewStream() *Stream {
	s := &Stream{
		hub:      h,
		watchers: make(map[int64]*watcher),
		lagSlot:  -1,
		wake:     make(chan struct{}, 1),
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.gone, s.closed = true, true
		return s
	}
	h.streams[s] = struct{}{}
	h.metrics.streams.Inc()
	return s
}

// Watch creates a watch as etcd's WatchCreateRequest describes it and
// queues etcd's answer: a created response carrying the watch ID, or a
// created-and-canceled one with watch ID -1 and the reason. It returns the
// ID or the reason. Events follow the created response.
func (s *Stream) Watch(req *pb.WatchCreateRequest) (int64, error) {
	h := s.hub
	key, end, fromKey := string(req.Key), string(req.RangeEnd), false
	if key == "" {
		key = "\x00" // the smallest key
	}
	if end == "\x00" {
		end, fromKey = "", true
	}
	var filter eventFilter
	for _, f := range req.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			filter |= filterNoPut
		case pb.WatchCreateRequest_NODELETE:
			filter |= filterNoDelete
		}
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if s.gone {
		return InvalidWatchID, ErrClosed
	}
	rev := h.pubRev.Load()
	refuse := func(err error) (int64, error) {
		s.push(Response{WatchID: InvalidWatchID, Revision: rev, Created: true, Canceled: true, CancelReason: err.Error()}, 0, false, true)
		return InvalidWatchID, err
	}
	switch {
	case req.StartRevision < 0:
		return refuse(ErrCompactedStart)
	case end != "" && key >= end:
		return refuse(ErrEmptyRange)
	}
	id := req.WatchId
	if id == 0 {
		// 0 asks for an ID; etcd hands out the lowest unused one
		// counting up from the previous.
		for s.watchers[s.nextID] != nil {
			s.nextID++
		}
		id = s.nextID
		s.nextID++
	} else if s.watchers[id] != nil {
		return refuse(ErrDuplicateID)
	}

	w := &watcher{
		id:             id,
		stream:         s,
		lagSlot:        -1,
		startRev:       req.StartRevision,
		filter:         filter,
		prevKV:         req.PrevKv,
		progressNotify: req.ProgressNotify,
		fragment:       req.Fragment,
		quiet:          true,
	}
	g, _ := h.index.join(key, end, fromKey)
	w.group, w.slot = g, len(g.watchers)
	g.watchers = append(g.watchers, w)
	s.watchers[id] = w
	h.metrics.watchers.Inc()
	s.push(Response{WatchID: id, Revision: rev, Created: true}, 0, false, true)

	if w.startRev == 0 || w.startRev > rev {
		// From now, or from a future revision: only the fan-out's
		// events at or after minRev concern it.
		w.state, w.minRev = stateSynced, max(w.startRev, rev+1)
		g.synced++
	} else {
		w.state = stateLagging
		h.addLaggingLocked(w, w.startRev)
	}
	if w.progressNotify {
		s.progressUsers++
		if s.progressTimer == nil {
			h.startProgressTimerLocked(s)
		}
	}
	return id, nil
}

// Cancel ends a watch and queues etcd's canceled response. It reports
// false, and queues nothing, if the stream has no such watch.
func (s *Stream) Cancel(id int64) bool {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	w := s.watchers[id]
	if w == nil || s.gone {
		return false
	}
	h.removeLocked(w)
	s.push(Response{WatchID: id, Revision: h.pubRev.Load(), Canceled: true}, 0, false, true)
	return true
}

// RequestProgress asks for etcd's stream-wide progress notification: a
// response with watch ID -1, no events, and a header revision, at least
// the current one, that every watch of the stream has fully delivered. As
// in etcd it is sent only when every watch is synced and has started;
// otherwise the request is dropped and the client learns the revision
// from the events on their way. (See progress.go for when it waits.)
func (s *Stream) RequestProgress() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.gone {
		return
	}
	s.progressAsked++
	s.progressTarget = h.pubRev.Load()
	if h.answerProgressLocked(s) && !s.progressQueued {
		s.progressQueued = true
		h.progressQ = append(h.progressQ, s)
	}
}

// Close ends every watch of the stream and makes Next return ErrClosed.
func (s *Stream) Close() {
	h := s.hub
	h.mu.Lock()
	if !s.gone {
		s.gone = true
		for _, w := range s.watchers {
			h.removeLocked(w)
		}
		if s.progressTimer != nil {
			s.progressTimer.Stop()
			s.progressTimer = nil
		}
		delete(h.streams, s)
		h.metrics.streams.Dec()
	}
	h.mu.Unlock()

	s.mu.Lock()
	if !s.closed {
		s.closed = true
		h.metrics.pendingEvents.Add(-int64(s.pending))
		s.queue.reset(h.blocks)
		s.bytes, s.pending = 0, 0
		signal(s.wake)
	}
	s.mu.Unlock()
}

// Next waits until responses are queued, then appends up to 64 of them to
// dst in order and returns it. It fails with ErrClosed once the stream is
// closed, or with ctx's error. Events of watchers that asked for prev_kv
// are copied with the previous value filled in.
func (s *Stream) Next(ctx context.Context, dst []Response) ([]Response, error) {
	s.mu.Lock()
	for s.queue.len() == 0 && !s.closed {
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
		s.mu.Lock()
	}
	if s.closed {
		s.mu.Unlock()
		return dst, ErrClosed
	}
	var withPrevKV []int
	n := min(s.queue.len(), nextBatch)
	events := 0
	for range n {
		q := s.queue.pop(s.hub.blocks)
		if q.prevKV && len(q.resp.Events) > 0 {
			withPrevKV = append(withPrevKV, len(dst))
		}
		dst = append(dst, q.resp)
		s.bytes -= q.size
		events += len(q.resp.Events)
	}
	s.pending -= events
	roomNow := s.behind && s.bytes < s.hub.budget/2
	s.mu.Unlock()

	if roomNow {
		signal(s.hub.catchUpWake)
	}
	s.hub.metrics.pendingEvents.Add(-int64(events))
	s.hub.metrics.sentEvents.Add(int64(events))
	for _, i := range withPrevKV {
		dst[i].Events = s.hub.withPrevKV(dst[i].Events)
	}
	return dst, nil
}

// withPrevKV returns copies of evs with PrevKv filled in, as etcd does
// when it sends them: from the store at the revision before each event,
// except for the event that created a key, which had none.
func (h *Hub) withPrevKV(evs []*mvccpb.Event) []*mvccpb.Event {
	out := make([]*mvccpb.Event, len(evs))
	copies := make([]mvccpb.Event, len(evs))
	for i, ev := range evs {
		c := &copies[i]
		c.Type, c.Kv = ev.Type, ev.Kv
		if !(ev.Type == mvccpb.PUT && ev.Kv.CreateRevision == ev.Kv.ModRevision) {
			prev, err := h.hist.PrevKV(ev.Kv.Key, ev.Kv.ModRevision)
			if err == nil {
				c.PrevKv = prev
			}
		}
		out[i] = c
	}
	return out
}

// push queues a response of the given estimated size (0 for one without
// events). Unless force is set it refuses (returns false) when the
// stream's queue is at its budget; control responses are always queued. A
// closed stream swallows everything.
func (s *Stream) push(r Response, size int, prevKV, force bool) bool {
	if size == 0 {
		size = responseOverhead
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true
	}
	if !force && s.bytes >= s.hub.budget {
		return false
	}
	if s.queue.len() == 0 {
		signal(s.wake)
	}
	s.queue.push(queued{resp: r, size: size, prevKV: prevKV}, s.hub.blocks)
	s.bytes += size
	s.pending += len(r.Events)
	s.hub.metrics.pendingEvents.Add(int64(len(r.Events)))
	return true
}

// pushChain queues a chain of staged responses in one go.
func (s *Stream) pushChain(list []stagedResponse, first int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || first < 0 {
		return
	}
	if s.queue.len() == 0 {
		signal(s.wake)
	}
	events := 0
	for i := first; i >= 0; i = list[i].next {
		q := list[i].q
		s.queue.push(q, s.hub.blocks)
		s.bytes += q.size
		events += len(q.resp.Events)
	}
	s.pending += events
	s.hub.metrics.pendingEvents.Add(int64(events))
}

// queuedBytes is the estimated size of what the stream has queued.
func (s *Stream) queuedBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// hasRoom reports whether the stream's queue is below half its budget, the
// point from which the catch-up path feeds it again.
func (s *Stream) hasRoom() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed && s.bytes < s.hub.budget/2
}

func (s *Stream) setBehind(behind bool) {
	s.mu.Lock()
	s.behind = behind
	s.mu.Unlock()
}

// Size estimates of what a queued response pins in memory.
const (
	responseOverhead = 96
	eventOverhead    = 64
)

// responseSize estimates the memory a queued response with evs pins.
func responseSize(evs []*mvccpb.Event) int {
	n := responseOverhead + 8*len(evs)
	for _, ev := range evs {
		n += eventOverhead + len(ev.Kv.Key) + len(ev.Kv.Value)
	}
	return n
}

// jitteredInterval is the stream's progress period: the hub's plus up to a
// tenth of it, so that streams opened together do not tick together (as
// etcd does).
func jitteredInterval(d time.Duration) time.Duration {
	return d + rand.N(d/10+1)
}
