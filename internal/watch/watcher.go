package watch

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// watcherState is where a watcher is in its life; see doc.go for the
// transitions.
type watcherState uint8

const (
	// stateSynced: the watcher has been given every event below the
	// hub's fan-out point and receives new events from the fan-out.
	stateSynced watcherState = iota + 1
	// stateLagging: the watcher reads its missed revisions from History,
	// starting at minRev, on the catch-up path.
	stateLagging
	// stateCompacted: the watcher fell below the compacted revision and
	// was told so. It receives nothing, but keeps its ID until the client
	// cancels it, as in etcd.
	stateCompacted
	// stateCanceled: the watcher is gone; only stale references remain.
	stateCanceled
)

// eventFilter is the set of event types a watcher does not want.
type eventFilter uint8

const (
	filterNoPut eventFilter = 1 << iota
	filterNoDelete
)

// drops reports whether the filter removes ev.
func (f eventFilter) drops(ev *mvccpb.Event) bool {
	if ev.Type == mvccpb.DELETE {
		return f&filterNoDelete != 0
	}
	return f&filterNoPut != 0
}

// watcher is one watch of a stream. Every field is guarded by Hub.mu
// except the immutable ones (id, stream, startRev, filter and the option
// flags).
//
// minRev has one meaning in every state: the watcher has been given every
// event it wants with a revision below minRev, and none at or above it.
// A synced watcher is given the fan-out's events from minRev on (minRev is
// above the fan-out point only for a watcher that joined since the last
// fan-out pass, or that starts in the future); a lagging watcher reads
// History from minRev.
type watcher struct {
	id       int64
	stream   *Stream
	group    *group // nil once compacted or canceled
	slot     int    // position in group.watchers
	lagSlot  int    // position in stream.lagging while lagging
	startRev int64  // the start_revision asked for, 0 for "from now"
	minRev   int64
	state    watcherState
	filter   eventFilter

	prevKV         bool
	progressNotify bool
	fragment       bool
	// quiet is etcd's progress bookkeeping: no event was queued for the
	// watcher since the last periodic progress tick.
	quiet bool
	// open is 1 + the sequence number, in its stream's outbox, of the
	// last events response queued for the watcher (0: none yet), which
	// later events may be merged into while it waits (Stream.mergeLocked).
	open uint64
}

// eventsFrom returns the suffix of evs (in revision order) at or above rev.
func eventsFrom(evs []*mvccpb.Event, rev int64) []*mvccpb.Event {
	i := 0
	for i < len(evs) && evs[i].Kv.ModRevision < rev {
		i++
	}
	return evs[i:]
}

// groupEvents is what one group matched in one pass over a run of events:
// the events in revision order and, computed on first use and shared by
// every watcher of the group with the same filter, the filtered variants
// and the payload of each (see eventsPayload).
//
// The events are copies private to the group (their KeyValues are
// shared): a queued response must pin only its own events, not the whole
// commit or History read they came from, or a slow stream could hold far
// more memory than its budget accounts for.
type groupEvents struct {
	g        *group
	first    *mvccpb.Event   // the only event added so far, not yet copied
	vals     []mvccpb.Event  // the copies, once there are two events or more
	evs      []*mvccpb.Event // pointers to the copies, made by seal
	variants [filterNoPut | filterNoDelete + 1]struct {
		done    bool
		evs     []*mvccpb.Event
		payload int
	}
}

// add appends ev. A caller that knows the count in advance may give vals
// that capacity.
func (m *groupEvents) add(ev *mvccpb.Event) {
	if m.vals == nil {
		if m.first == nil {
			m.first = ev
			return
		}
		m.vals = append(make([]mvccpb.Event, 0, 4), *m.first)
	}
	m.vals = append(m.vals, *ev)
}

// seal copies the events and points evs at the copies; add must not be
// called afterwards.
func (m *groupEvents) seal() {
	if m.vals == nil {
		if m.first != nil {
			// The common case, in one allocation rather than two.
			one := &singleEvent{val: *m.first}
			one.ptr[0] = &one.val
			m.evs = one.ptr[:]
		}
		m.first = nil
		return
	}
	m.evs = make([]*mvccpb.Event, len(m.vals))
	for i := range m.vals {
		m.evs[i] = &m.vals[i]
	}
}

// singleEvent holds a group's only event and the slice that points to it.
type singleEvent struct {
	val mvccpb.Event
	ptr [1]*mvccpb.Event
}

// forFilter returns the events a watcher with filter f keeps, and their
// payload.
func (m *groupEvents) forFilter(f eventFilter) ([]*mvccpb.Event, int) {
	v := &m.variants[f]
	if !v.done {
		v.done = true
		if f == 0 {
			v.evs = m.evs
		} else {
			for _, ev := range m.evs {
				if !f.drops(ev) {
					v.evs = append(v.evs, ev)
				}
			}
		}
		v.payload = eventsPayload(v.evs)
	}
	return v.evs, v.payload
}

// shared is the payload of all of m's events: what the group's watchers
// share, counted once against each stream's budget.
func (m *groupEvents) shared() int {
	_, payload := m.forFilter(0)
	return payload
}

// wanted returns the events of m a watcher wants, and their payload:
// those its filter keeps, at or above its minRev.
func (m *groupEvents) wanted(w *watcher) ([]*mvccpb.Event, int) {
	evs, payload := m.forFilter(w.filter)
	if len(evs) > 0 && evs[0].Kv.ModRevision < w.minRev {
		evs = eventsFrom(evs, w.minRev)
		payload = eventsPayload(evs)
	}
	return evs, payload
}
