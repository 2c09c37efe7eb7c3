package watch

import "go.etcd.io/etcd/api/v3/mvccpb"

// Direct delivery. Handing a commit to the fan-out goroutine costs every
// event one more goroutine wake-up than etcd pays (apply -> fan-out ->
// the stream's sender, where etcd's apply queues the event on the
// stream's channel itself), and while the event waits for the fan-out to
// be scheduled, the put's answer, which the apply goroutine hands over
// next, races ahead of it. So when the fan-out has nothing to do and the
// commit concerns few watchers, Publish fans it out itself:
//
//   - the hub's lock is taken with TryLock: if the fan-out, the catch-up
//     path or a watch request holds it, the commit goes to the backlog as
//     before. Publish never waits for the lock (nothing that holds it
//     waits for a client either, but a fan-out pass over thousands of
//     watchers is long);
//   - the fan-out must run (a hub a test builds without it leaves every
//     commit in the backlog), the backlog must be empty and the fan-out
//     point at the last
//     published revision: events are then handed out in revision order
//     whichever goroutine hands them out, and fanRev, progress and the
//     catch-up path see the same states as after a fan-out pass;
//   - no watcher may be lagging: the catch-up path hands a watcher back
//     only if the fan-out point has not passed what it read, and a fan-out
//     point moved by every commit the instant it is published left
//     watchers lagging far longer (at 10,000 watchers of one key whose
//     client could not keep up, events/s halved and the p99 tripled);
//   - the work is bounded: at most directMaxEvents events, and matching
//     stops (and hands the commit to the fan-out) as soon as more than
//     directMaxWatchers synced watchers, or groups, are concerned. The
//     watchers are not waited for: a stream's queue is filled under its
//     own lock, which nobody holds while waiting for a client, and a full
//     queue makes the watcher lag, as in the fan-out.
//
// A commit that no watcher wants (no watch stream open, say) costs the
// lookups and no wake-up at all, and holds no memory in the backlog.

const (
	// directMaxEvents bounds the events of a commit delivered directly.
	directMaxEvents = 64
	// directMaxWatchers bounds the synced watchers (and the groups) a
	// commit delivered directly may concern, so that delivering it inline
	// stays short (docs/performance.md, "Measurements behind the code").
	directMaxWatchers = 256
)

// publishDirect delivers a commit of revisions up to rev from the
// caller's goroutine if the rules above allow it, and reports whether it
// did; when it did not, nothing changed.
func (h *Hub) publishDirect(rev int64, events []mvccpb.Event) bool {
	if len(events) == 0 || len(events) > directMaxEvents || !h.mu.TryLock() {
		return false
	}
	defer h.mu.Unlock()
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	prev := h.pubRev.Load()
	if h.closed || !h.running || len(h.lagStreams) > 0 || len(h.backlog) > 0 || h.fanRev != prev || rev <= prev || !contiguous(prev, rev, events) {
		return false
	}
	if !h.fo.matchFew(h, events, directMaxWatchers) {
		return false
	}
	h.pubRev.Store(rev)
	h.fo.deliver(h, prev+1, rev)
	h.fanRev = rev
	h.retryProgressLocked()
	return true
}

// matchFew matches events as match does, unless they concern more than
// limit synced watchers or groups; it then reports false, having matched
// no more than about limit groups per event.
func (fo *fanOut) matchFew(h *Hub, events []mvccpb.Event, limit int) bool {
	pass := fo.begin(h)
	watchers := 0
	for j := range events {
		watchers += fo.matchEvent(h, &events[j], pass, limit-watchers)
		if watchers > limit {
			clear(fo.groups)
			clear(fo.hits)
			clear(fo.touched)
			fo.hits, fo.touched = fo.hits[:0], fo.touched[:0]
			return false
		}
	}
	clear(fo.groups)
	return true
}
