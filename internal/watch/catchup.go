package watch

import (
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

const (
	// catchUpWatchers is how many lagging watchers one catch-up round
	// serves (etcd's maxWatchersPerSync).
	catchUpWatchers = 512
	// catchUpEvents is the limit of one History read: it bounds what a
	// round queues to a stream beyond its budget.
	catchUpEvents = 1024
	// catchUpRetry is how long the catch-up path waits after History
	// failed before it tries again.
	catchUpRetry = 100 * time.Millisecond
)

// catchUpLoop serves lagging watchers whose streams have room.
func (h *Hub) catchUpLoop() {
	defer h.wg.Done()
	var cu catchUp
	for {
		select {
		case <-h.catchUpWake:
		case <-h.done:
			return
		}
		for {
			more, err := cu.round(h)
			if err != nil {
				h.log.Warn("watch catch-up failed to read history, retrying", "error", err)
				select {
				case <-time.After(catchUpRetry):
				case <-h.done:
					return
				}
				continue
			}
			if !more {
				break
			}
		}
	}
}

// catchUp is the catch-up path's scratch space.
type catchUp struct {
	batch   []catchUpEntry
	streams []*Stream
	lagging []*watcher
	groups  []*group
	sharers []*Stream // streams given the current group's events
}

// catchUpEntry is a watcher of the round with a copy of its keys (the
// watcher's group may go while History is read).
type catchUpEntry struct {
	w        *watcher
	from     int64
	key, end string
	fromKey  bool
}

// round serves up to catchUpWatchers lagging watchers: it reads the
// revisions they missed from History with one bounded read over the union
// of their keys, queues each its events, and returns to the fan-out those
// that reached it. It reports whether it did anything (so another round
// may have work).
func (cu *catchUp) round(h *Hub) (bool, error) {
	compactRev := h.hist.CompactRev()
	h.mu.Lock()
	acted := cu.pickLocked(h, compactRev)
	endRev := h.pubRev.Load() + 1
	h.mu.Unlock()
	if len(cu.batch) == 0 {
		return acted, nil
	}
	defer func() { clear(cu.batch) }()

	evs, next, retry, err := cu.read(h, endRev)
	if err != nil || retry {
		return retry, err
	}
	matched := cu.match(evs)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range matched {
		cu.deliverLocked(h, &matched[i], next)
	}
	return true, nil
}

// read reads from History the events the round's watchers miss, from the
// oldest revision one of them needs up to endRev (exclusive), and returns
// them with the revision the next read starts at. retry reports a
// compaction meanwhile: the next round cancels whom it concerns.
func (cu *catchUp) read(h *Hub, endRev int64) (evs []mvccpb.Event, next int64, retry bool, err error) {
	minRev := cu.batch[0].from
	for _, e := range cu.batch[1:] {
		minRev = min(minRev, e.from)
	}
	if minRev >= endRev {
		return nil, endRev, false, nil
	}
	key, rangeEnd := cu.bounds()
	evs, next, err = h.hist.Events(minRev, endRev, key, rangeEnd, catchUpEvents)
	if errors.Is(err, h.errCompacted) {
		if h.hist.CompactRev() <= minRev {
			return nil, 0, false, fmt.Errorf("history reports revision %d compacted, but its compacted revision is %d: %w", minRev, h.hist.CompactRev(), err)
		}
		return nil, 0, true, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("read events %d..%d: %w", minRev, endRev, err)
	}
	if next <= minRev || next > endRev {
		return nil, 0, false, fmt.Errorf("history returned next revision %d for a read of %d..%d", next, minRev, endRev)
	}
	return evs, next, false, nil
}

// match sorts the events to the round's watchers through a private index
// of their keys: one groupEvents per distinct watched range.
func (cu *catchUp) match(evs []mvccpb.Event) []groupEvents {
	tix := newIndex()
	var matched []groupEvents
	for _, e := range cu.batch {
		g, created := tix.join(e.key, e.end, e.fromKey)
		if created {
			g.slot = int32(len(matched))
			matched = append(matched, groupEvents{g: g})
		}
		g.watchers = append(g.watchers, e.w)
	}
	for i := range evs {
		ev := &evs[i]
		cu.groups = tix.match(ev.Kv.Key, cu.groups[:0])
		for _, g := range cu.groups {
			matched[g.slot].add(ev)
		}
	}
	clear(cu.groups)
	for i := range matched {
		matched[i].seal()
	}
	return matched
}

// deliverLocked hands one group's events to its watchers that are still
// lagging, moves them on to next, and syncs those that caught up with the
// fan-out. The events a group's watchers share count once against each
// stream's budget.
func (cu *catchUp) deliverLocked(h *Hub, m *groupEvents, next int64) {
	h.groupPasses++
	group := h.groupPasses
	for _, w := range m.g.watchers {
		if w.state != stateLagging {
			continue // canceled while History was read
		}
		if evs, payload := m.wanted(w); len(evs) > 0 {
			s := w.stream
			seq, ok := s.pushEvents(w, eventsResponse(w, next-1, evs, payload))
			if !ok {
				// The stream filled up during this round: the
				// watcher stays where it was until there is room.
				continue
			}
			if s.shareGroup != group {
				s.shareGroup, s.shareSeq = group, seq
				cu.sharers = append(cu.sharers, s)
			}
			s.shareSeq = max(s.shareSeq, seq)
			w.quiet = false
		}
		w.minRev = max(w.minRev, next)
		if w.minRev > h.fanRev {
			// Every later revision is still in the backlog, so
			// the fan-out will give it the rest.
			h.syncLocked(w, w.minRev)
		}
	}
	for _, s := range cu.sharers {
		s.chargeShared(s.shareSeq, m.shared())
	}
	clear(cu.sharers)
	cu.sharers = cu.sharers[:0]
}

// pickLocked chooses the round's watchers: lagging watchers of streams
// with room, starting from a rotating stream so that none starves. Those
// already below the compacted revision are canceled on the way. It reports
// whether it canceled any.
func (cu *catchUp) pickLocked(h *Hub, compactRev int64) bool {
	cu.batch = cu.batch[:0]
	n := len(h.lagStreams)
	if n == 0 {
		return false
	}
	h.lagCursor = (h.lagCursor + 1) % n
	cu.streams = append(cu.streams[:0], h.lagStreams[h.lagCursor:]...)
	cu.streams = append(cu.streams, h.lagStreams[:h.lagCursor]...)
	acted := false
	for _, s := range cu.streams {
		if len(cu.batch) == catchUpWatchers {
			break
		}
		if !s.hasRoom() {
			continue
		}
		// Take the stream's lagging watchers from a rotating position,
		// so that those a full stream turned away come first next time.
		k := min(len(s.lagging), catchUpWatchers-len(cu.batch))
		s.lagCursor %= len(s.lagging)
		cu.lagging = append(cu.lagging[:0], s.lagging[s.lagCursor:]...)
		cu.lagging = append(cu.lagging, s.lagging[:s.lagCursor]...)
		cu.lagging = cu.lagging[:k]
		s.lagCursor += k
		for _, w := range cu.lagging {
			if w.minRev < compactRev {
				h.compactLocked(w, compactRev)
				acted = true
				continue
			}
			g := w.group
			cu.batch = append(cu.batch, catchUpEntry{w: w, from: w.minRev, key: g.key, end: g.end, fromKey: g.fromKey})
		}
	}
	clear(cu.streams)
	clear(cu.lagging)
	return acted
}

// bounds returns the smallest key range, in History's conventions, that
// covers every watcher of the round.
func (cu *catchUp) bounds() (key, rangeEnd []byte) {
	first := cu.batch[0]
	lo, hi, open := first.key, first.end, first.fromKey
	single := first.end == "" && !first.fromKey
	if single {
		hi = first.key + "\x00"
	}
	for _, e := range cu.batch[1:] {
		isSingle := e.end == "" && !e.fromKey
		if !(single && isSingle && e.key == first.key) {
			single = false
		}
		lo = min(lo, e.key)
		switch {
		case e.fromKey:
			open = true
		case isSingle:
			hi = max(hi, e.key+"\x00")
		default:
			hi = max(hi, e.end)
		}
	}
	switch {
	case single:
		return []byte(first.key), nil
	case open:
		return []byte(lo), []byte{0}
	}
	return []byte(lo), []byte(hi)
}
