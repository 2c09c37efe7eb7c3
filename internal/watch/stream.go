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
	// nextBatchBytes is how much payload Next takes at most (but always
	// one response): gRPC's write quota per stream, beyond which sending
	// waits for the client anyway. What it leaves queued can still take
	// in new events (see mergeLocked); what it took cannot.
	nextBatchBytes = 64 << 10
	// mergeMaxEvents and mergeMaxBytes bound a response that merges
	// absorbed events into, so that merging never builds a message a
	// client would refuse: etcd's own batches stop at 1000 revisions, and
	// gRPC clients refuse 4 MiB by default.
	mergeMaxEvents = 1000
	mergeMaxBytes  = 1 << 20
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
	// The catch-up path's bookkeeping of the group pass
	// (Hub.groupPasses) whose events it is handing to the stream: the
	// newest response that carries them (see chargeShared).
	shareGroup uint64
	shareSeq   uint64

	// pace is used by Next's caller only.
	pace pacer

	// mu guards the outbox. It comes after Hub.mu in the lock order (see
	// Hub.mu).
	mu     sync.Mutex
	queue  outbox
	bytes  int  // estimated size of the queued responses
	behind bool // the stream has lagging watchers (mirror of len(lagging) > 0)
	closed bool
	wake   chan struct{}
	// mergeFloor is the sequence number of the oldest queued response
	// events may still be merged into: the one after the last control
	// response.
	mergeFloor uint64
	pending    int // events queued, for the pending-events gauge
}

// queued is a response in a stream's outbox.
type queued struct {
	resp Response
	// size is what the response counts against the stream's budget.
	size int
	// payload estimates the encoded size of its events, which merges
	// keep under mergeMaxBytes.
	payload int
	prevKV  bool
	// owned: resp.Events is the response's own slice (made by a merge),
	// which later merges may append to; otherwise it is shared.
	owned bool
}

// NewStream opens a watch stream.
func (h *Hub) NewStream() *Stream {
	s := &Stream{
		hub:      h,
		watchers: make(map[int64]*watcher),
		lagSlot:  -1,
		wake:     make(chan struct{}, 1),
		pace:     newPacer(h.responseRate, h.responseBurst),
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
	key, end, fromKey := watchedRange(req)
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.gone {
		return InvalidWatchID, ErrClosed
	}
	rev := h.pubRev.Load()
	refuse := func(err error) (int64, error) {
		s.pushControl(Response{WatchID: InvalidWatchID, Revision: rev, Created: true, Canceled: true, CancelReason: err.Error()})
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
	s.addLocked(req, id, rev, key, end, fromKey)
	return id, nil
}

// watchedRange is the key range a create request watches, as the index
// keys it: [key, end), or every key from key on when fromKey.
func watchedRange(req *pb.WatchCreateRequest) (key, end string, fromKey bool) {
	key, end = string(req.Key), string(req.RangeEnd)
	if key == "" {
		key = "\x00" // the smallest key
	}
	if end == "\x00" {
		end, fromKey = "", true
	}
	return key, end, fromKey
}

// addLocked creates watch id of the request, at the published revision
// rev, and queues its created response. Called with Hub.mu held.
func (s *Stream) addLocked(req *pb.WatchCreateRequest, id, rev int64, key, end string, fromKey bool) {
	h := s.hub
	var filter eventFilter
	for _, f := range req.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			filter |= filterNoPut
		case pb.WatchCreateRequest_NODELETE:
			filter |= filterNoDelete
		}
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
	s.pushControl(Response{WatchID: id, Revision: rev, Created: true})

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
	s.pushControl(Response{WatchID: id, Revision: h.pubRev.Load(), Canceled: true})
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

// Next waits until responses are queued, then appends up to 64 of them
// (and up to 64 KiB of events) to dst in order and returns it. Event
// responses are paced (see pace.go). It fails with ErrClosed once the stream is
// closed, or with ctx's error. Events of watchers that asked for prev_kv
// are copied with the previous value filled in.
func (s *Stream) Next(ctx context.Context, dst []Response) ([]Response, error) {
	s.mu.Lock()
	if err := s.awaitSendableLocked(ctx); err != nil {
		s.mu.Unlock()
		return dst, err
	}
	var withPrevKV []int
	n := min(s.queue.len(), nextBatch)
	events, payload := 0, 0
	for i := 0; i < n && payload < nextBatchBytes; i++ {
		if head := s.queue.at(s.queue.popped); len(head.resp.Events) > 0 && !s.pace.take() {
			break // the rest waits for tokens, taking in new events
		}
		q := s.queue.pop(s.hub.blocks)
		payload += q.payload
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

// pushControl queues a response without events (created, canceled,
// progress). Control responses are always queued, whatever the budget. No
// events are merged into a response queued before one: they would reach
// the client ahead of it, and a progress notification (or a watcher's
// creation) must never be followed by older events than those before it.
// A closed stream swallows everything.
func (s *Stream) pushControl(r Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.queue.len() == 0 {
		signal(s.wake)
	}
	s.queue.push(queued{resp: r, size: responseOverhead}, s.hub.blocks)
	s.mergeFloor = s.queue.pushed
	s.bytes += responseOverhead
}

// pushEvents queues w's events, unless the stream's queue is at its
// budget (it then reports false), and returns the sequence number of the
// response that carries them. The caller holds Hub.mu, and charges the
// events' payload with chargeShared.
func (s *Stream) pushEvents(w *watcher, q queued) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, true
	}
	if s.bytes >= s.hub.budget {
		return 0, false
	}
	return s.pushEventsLocked(w, q), true
}

// pushChain queues a chain of staged responses in one go, and charges
// each group's events to the newest response that carries them. The
// caller holds Hub.mu.
func (s *Stream) pushChain(list []stagedResponse, first int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || first < 0 {
		return
	}
	var (
		group  uint64
		shared int
		newest uint64
	)
	for i := first; i >= 0; i = list[i].next {
		r := &list[i]
		if r.group != group {
			s.chargeSharedLocked(newest, shared)
			group, shared, newest = r.group, r.shared, 0
		}
		newest = max(newest, s.pushEventsLocked(r.w, r.q))
	}
	s.chargeSharedLocked(newest, shared)
}

// pushEventsLocked adds w's events to w's response still in the queue, if
// it can take them (see mergeLocked), or queues a new response for them,
// and returns the sequence number of the one that took them. A client that
// reads slowly thus gets fewer, larger responses, and each watcher's
// events wait only for the place its oldest unsent one has in the queue.
// Called with Hub.mu and s.mu held.
func (s *Stream) pushEventsLocked(w *watcher, q queued) uint64 {
	events := len(q.resp.Events)
	s.pending += events
	s.hub.metrics.pendingEvents.Add(int64(events))
	if s.mergeLocked(w, &q) {
		return w.open - 1
	}
	if s.queue.len() == 0 {
		signal(s.wake)
	}
	seq := s.queue.push(q, s.hub.blocks)
	w.open = seq + 1
	s.bytes += q.size
	return seq
}

// chargeShared counts n bytes of events shared by several of the stream's
// responses against its budget, with the newest of them, sequence number
// seq: the last to be taken, after which nothing in the queue holds the
// events any more. The budget thus accounts for them exactly as long as
// they are pinned, once however many responses share them.
func (s *Stream) chargeShared(seq uint64, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chargeSharedLocked(seq, n)
}

func (s *Stream) chargeSharedLocked(seq uint64, n int) {
	if n == 0 {
		return
	}
	if q := s.queue.at(seq); q != nil {
		q.size += n
		s.bytes += n
	}
}

// mergeLocked appends q's events to w's open response: the last events
// response queued for w, if no control response was queued after it, it
// has not been taken yet, and the merged response stays within
// mergeMaxEvents and mergeMaxBytes. The events are in revision order
// because every later event of w follows the ones already queued.
func (s *Stream) mergeLocked(w *watcher, q *queued) bool {
	if w.open == 0 || w.open-1 < s.mergeFloor {
		return false
	}
	open := s.queue.at(w.open - 1)
	if open == nil {
		return false
	}
	n := len(open.resp.Events) + len(q.resp.Events)
	if n > mergeMaxEvents || open.payload+q.payload > mergeMaxBytes {
		return false
	}
	if !open.owned {
		// Other watchers' responses share the slice: cap it, so that
		// append copies it into one of this response's own, which
		// later merges may then extend in place.
		k := len(open.resp.Events)
		open.resp.Events, open.owned = open.resp.Events[:k:k], true
	}
	open.resp.Events = append(open.resp.Events, q.resp.Events...)
	open.resp.Revision = q.resp.Revision
	open.payload += q.payload
	// The merged events cost no response of their own.
	grow := q.size - responseOverhead
	open.size += grow
	s.bytes += grow
	return true
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
	pointerSize      = 8
	eventOverhead    = 64
)

// eventsPayload estimates the memory evs's events pin (their copies and
// key-values) and, as well, their encoded size.
func eventsPayload(evs []*mvccpb.Event) int {
	n := 0
	for _, ev := range evs {
		n += eventOverhead + len(ev.Kv.Key) + len(ev.Kv.Value)
	}
	return n
}

// eventsResponse builds the queue item of a response carrying evs (whose
// payload is given) for w. It counts its own overhead and event pointers
// against its stream's budget; the events themselves, shared by the
// watchers of a group, are counted with chargeShared.
func eventsResponse(w *watcher, rev int64, evs []*mvccpb.Event, payload int) queued {
	return queued{
		resp:    Response{WatchID: w.id, Revision: rev, Events: evs, Fragment: w.fragment},
		size:    responseOverhead + pointerSize*len(evs),
		payload: payload,
		prevKV:  w.prevKV,
	}
}

// jitteredInterval is the stream's progress period: the hub's plus up to a
// tenth of it, so that streams opened together do not tick together (as
// etcd does).
func jitteredInterval(d time.Duration) time.Duration {
	return d + rand.N(d/10+1)
}
