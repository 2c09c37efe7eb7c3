package watch

import (
	"math"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// fanOut is the fan-out's scratch space, reused from pass to pass. All its
// work runs with Hub.mu held.
type fanOut struct {
	groups  []*group
	hits    []fanOutHit
	touched []groupEvents
	counts  []int // events per touched group
	// staged holds the responses of the current chunk, chained per
	// stream, so that each stream is locked and woken once per chunk
	// rather than once per watcher.
	staged  []stagedResponse
	streams []*Stream // streams with staged responses
}

type fanOutHit struct {
	slot int32
	ev   *mvccpb.Event
}

type stagedResponse struct {
	q queued
	w *watcher
	// group identifies the group pass the events come from
	// (Hub.groupPasses), shared is the payload of all its events.
	group  uint64
	shared int
	next   int32 // the stream's next staged response, -1 for none
}

// run delivers a run of publications to the synced watchers, in chunks
// of whole publications of about fanOutChunkHits matches each.
func (fo *fanOut) run(h *Hub, run []publication) {
	for start := 0; start < len(run); {
		end := fo.match(h, run, start)
		fo.deliver(h, run[start].first, run[end-1].last)
		start = end
	}
	if cap(fo.hits) > 4*fanOutChunkHits {
		fo.hits = nil // a huge revision passed; do not keep its scratch
	}
}

// match matches the events of run[start:] to groups until the chunk is
// full, and returns where it stopped. Each touched group is listed once in
// touched; hits records, in order, which group each matched event goes to.
func (fo *fanOut) match(h *Hub, run []publication, start int) (end int) {
	pass := fo.begin(h)
	for end = start; end < len(run) && (end == start || len(fo.hits) < fanOutChunkHits); end++ {
		evs := run[end].events
		for j := range evs {
			fo.matchEvent(h, &evs[j], pass, math.MaxInt)
		}
	}
	clear(fo.groups)
	return end
}

// begin starts a matching pass and returns its number.
func (fo *fanOut) begin(h *Hub) uint64 {
	h.pass++
	fo.hits, fo.touched = fo.hits[:0], fo.touched[:0]
	return h.pass
}

// matchEvent records the groups ev goes to, and returns how many synced
// watchers the groups it touched first have. It looks at no more than
// limit+1 groups: with more, it returns more than limit having recorded
// only part of them (see matchFew).
func (fo *fanOut) matchEvent(h *Hub, ev *mvccpb.Event, pass uint64, limit int) (watchers int) {
	fo.groups = h.index.matchUpTo(ev.Kv.Key, fo.groups[:0], limit)
	if len(fo.groups) > limit {
		return len(fo.groups)
	}
	for _, g := range fo.groups {
		if g.synced == 0 {
			continue
		}
		if g.mark != pass {
			g.mark, g.slot = pass, int32(len(fo.touched))
			fo.touched = append(fo.touched, groupEvents{g: g})
			watchers += int(g.synced)
		}
		fo.hits = append(fo.hits, fanOutHit{slot: g.slot, ev: ev})
	}
	return watchers
}

// deliver gathers each touched group's events, shared by the group's
// watchers, and queues one response per watcher that wants any. The
// events span revisions first..last.
func (fo *fanOut) deliver(h *Hub, first, last int64) {
	if len(fo.hits) == 0 {
		return
	}
	counts := append(fo.counts[:0], make([]int, len(fo.touched))...)
	for _, ht := range fo.hits {
		counts[ht.slot]++
	}
	for i := range fo.touched {
		if counts[i] > 1 {
			fo.touched[i].vals = make([]mvccpb.Event, 0, counts[i])
		}
	}
	fo.counts = counts
	for _, ht := range fo.hits {
		fo.touched[ht.slot].add(ht.ev)
	}
	for i := range fo.touched {
		fo.touched[i].seal()
		fo.deliverGroup(h, &fo.touched[i], first, last)
	}
	for _, s := range fo.streams {
		s.pushChain(fo.staged, s.stageFirst)
	}
	clear(fo.hits)
	clear(fo.touched)
	clear(fo.staged)
	clear(fo.streams)
	fo.staged, fo.streams = fo.staged[:0], fo.streams[:0]
}

// deliverGroup stages a group's events, matched over revisions
// first..last, for each of its synced watchers.
func (fo *fanOut) deliverGroup(h *Hub, m *groupEvents, first, last int64) {
	h.groupPasses++
	group := h.groupPasses
	for _, w := range m.g.watchers {
		if w.state != stateSynced {
			continue
		}
		evs, payload := m.wanted(w)
		if len(evs) == 0 {
			continue
		}
		r := stagedResponse{q: eventsResponse(w, last, evs, payload), w: w, group: group, shared: m.shared()}
		if !fo.stage(h, w.stream, r) {
			// The client is not keeping up: stop feeding the watcher
			// here; it will read these revisions from History once its
			// stream has room again.
			h.lagLocked(w, max(w.minRev, first))
			continue
		}
		w.quiet = false
		w.minRev = last + 1
	}
}

// stage adds a response to its stream's chain for this chunk, unless the
// stream's queue (as it was when the chunk began, plus what is staged) is
// at its budget. A stream's responses of one group are staged together.
func (fo *fanOut) stage(h *Hub, s *Stream, r stagedResponse) bool {
	if s.stagePass != h.pass {
		s.stagePass = h.pass
		s.stageFirst, s.stageLast = -1, -1
		s.stageBytes = s.queuedBytes()
		fo.streams = append(fo.streams, s)
	}
	if s.stageBytes >= h.budget {
		return false
	}
	if s.stageLast < 0 || fo.staged[s.stageLast].group != r.group {
		s.stageBytes += r.shared
	}
	i := int32(len(fo.staged))
	r.next = -1
	fo.staged = append(fo.staged, r)
	if s.stageLast >= 0 {
		fo.staged[s.stageLast].next = i
	} else {
		s.stageFirst = i
	}
	s.stageLast = i
	s.stageBytes += r.q.size
	return true
}
