package watch

// Watcher state transitions. Every function here runs with Hub.mu held.

// lagLocked moves a synced watcher to the catch-up path, which will read
// History from revision from on.
func (h *Hub) lagLocked(w *watcher, from int64) {
	w.group.synced--
	w.state = stateLagging
	h.addLaggingLocked(w, from)
}

// addLaggingLocked puts a watcher in state lagging on its stream's list
// and wakes the catch-up path.
func (h *Hub) addLaggingLocked(w *watcher, from int64) {
	w.minRev = from
	s := w.stream
	w.lagSlot = len(s.lagging)
	s.lagging = append(s.lagging, w)
	if len(s.lagging) == 1 {
		s.lagSlot = len(h.lagStreams)
		h.lagStreams = append(h.lagStreams, s)
		s.setBehind(true)
	}
	h.metrics.slow.Inc()
	signal(h.catchUpWake)
}

// dropLaggingLocked takes a lagging watcher off its stream's list.
func (h *Hub) dropLaggingLocked(w *watcher) {
	s := w.stream
	last := len(s.lagging) - 1
	moved := s.lagging[last]
	s.lagging[w.lagSlot], moved.lagSlot = moved, w.lagSlot
	s.lagging[last] = nil
	s.lagging = s.lagging[:last]
	w.lagSlot = -1
	if last == 0 {
		end := len(h.lagStreams) - 1
		other := h.lagStreams[end]
		h.lagStreams[s.lagSlot], other.lagSlot = other, s.lagSlot
		h.lagStreams[end] = nil
		h.lagStreams = h.lagStreams[:end]
		s.lagSlot = -1
		s.setBehind(false)
	}
	h.metrics.slow.Dec()
}

// syncLocked returns a lagging watcher to the fan-out: it has been given
// every event below minRev, and the fan-out has not yet passed minRev.
func (h *Hub) syncLocked(w *watcher, minRev int64) {
	h.dropLaggingLocked(w)
	w.state, w.minRev = stateSynced, minRev
	w.group.synced++
}

// compactLocked cancels a lagging watcher whose next revision was
// compacted away, with etcd's response: canceled, compact_revision set,
// header revision 0. The watcher keeps its ID until the client cancels it.
func (h *Hub) compactLocked(w *watcher, compactRev int64) {
	h.dropLaggingLocked(w)
	h.leaveGroupLocked(w)
	w.state = stateCompacted
	w.stream.pushControl(Response{WatchID: w.id, CompactRevision: compactRev, Canceled: true})
}

// removeLocked forgets a watcher entirely (cancel, or its stream closed).
func (h *Hub) removeLocked(w *watcher) {
	switch w.state {
	case stateSynced:
		w.group.synced--
		h.leaveGroupLocked(w)
	case stateLagging:
		h.dropLaggingLocked(w)
		h.leaveGroupLocked(w)
	}
	w.state = stateCanceled
	s := w.stream
	delete(s.watchers, w.id)
	if w.progressNotify {
		s.progressUsers--
	}
	h.metrics.watchers.Dec()
}

func (h *Hub) leaveGroupLocked(w *watcher) {
	g := w.group
	last := len(g.watchers) - 1
	moved := g.watchers[last]
	g.watchers[w.slot], moved.slot = moved, w.slot
	g.watchers[last] = nil
	g.watchers = g.watchers[:last]
	if last == 0 {
		h.index.leave(g)
	}
	w.group = nil
}
