package watch

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// History is the store's past as the hub needs it: the catch-up path reads
// missed revisions from it and prev_kv is looked up in it. Implementations
// must be safe for concurrent use and must already hold every revision
// passed to Publish.
type History interface {
	// Events returns the events of the keys in [key, rangeEnd) (rangeEnd
	// nil: key alone; "\x00": every key >= key) with startRev <= revision <
	// endRev, in revision order, and the revision to continue from. With
	// limit > 0 it may stop early, but never inside a revision. It fails
	// with Options.ErrCompacted (possibly wrapped) when startRev is below
	// the compacted revision.
	Events(startRev, endRev int64, key, rangeEnd []byte, limit int) ([]mvccpb.Event, int64, error)
	// Rev is the current revision.
	Rev() int64
	// CompactRev is the compacted revision.
	CompactRev() int64
	// PrevKV returns the key's value just before rev, or nil if it did not
	// exist then (or that revision is compacted).
	PrevKV(key []byte, rev int64) (*mvccpb.KeyValue, error)
}

// Options configures a Hub. The zero value of every field but
// ErrCompacted selects the default.
type Options struct {
	Logger *slog.Logger
	// Metrics receives the hub's collectors; nil keeps them unregistered.
	Metrics prometheus.Registerer
	// ErrCompacted is the error History.Events returns for a compacted
	// start revision (kvstore.ErrCompacted); it is compared with errors.Is.
	ErrCompacted error
	// ProgressNotifyInterval is etcd's --watch-progress-notify-interval:
	// how often watchers created with progress_notify hear the revision
	// while nothing happens on their keys. 0 selects etcd's default of 10
	// minutes; values under 100ms are raised to 100ms, as etcd does.
	ProgressNotifyInterval time.Duration
	// StreamBufferBytes bounds what a stream queues for its client (an
	// estimate of the events' size). A watcher whose stream is full stops
	// receiving from the fan-out and later reads what it missed from
	// History. Default 1 MiB.
	StreamBufferBytes int
	// BacklogEvents bounds the events published but not yet fanned out.
	// Beyond it the backlog is dropped and every synced watcher catches up
	// from History instead. Default 65536.
	BacklogEvents int
	// StreamResponseRate bounds the event responses per second a stream
	// hands to its client once StreamResponseBurst of them are spent;
	// events that arrive meanwhile join the responses still queued (see
	// pace.go). Defaults 5000 and 1000; a negative rate leaves streams
	// unpaced.
	StreamResponseRate  int
	StreamResponseBurst int
}

const (
	defaultProgressInterval  = 10 * time.Minute
	minProgressInterval      = 100 * time.Millisecond
	defaultStreamBufferBytes = 1 << 20
	defaultBacklogEvents     = 1 << 16

	// fanOutBatchEvents is how many published events the fan-out takes
	// from the backlog at a time (whole commits, so a single large commit
	// can exceed it). It bounds the size of the responses it builds.
	fanOutBatchEvents = 4096
	// fanOutChunkHits is about how many (event, group) matches the
	// fan-out gathers before it queues responses: it bounds the fan-out's
	// scratch memory when many groups match every event.
	fanOutChunkHits = 1 << 16
)

// ErrClosed is returned by a Stream that was closed, or whose hub was.
var ErrClosed = errors.New("watch: stream closed")

// Hub delivers the store's changes to watchers. See doc.go for the design.
type Hub struct {
	log          *slog.Logger
	hist         History
	errCompacted error
	progress     time.Duration
	budget       int
	backlogLimit int
	// responseRate and responseBurst configure each stream's pacer
	// (rate 0: unpaced).
	responseRate, responseBurst int
	metrics                     *metrics
	blocks                      *sync.Pool // outbox blocks shared by the streams

	// pubMu guards the backlog: what Publish handed over and the fan-out
	// has not taken yet. Taken alone, it is held only for O(1) work so
	// that Publish never waits on the fan-out or on watchers; a direct
	// delivery (direct.go) holds it, under mu, for its bounded work.
	pubMu         sync.Mutex
	backlog       []publication
	backlogEvents int          // events in backlog
	pubRev        atomic.Int64 // last revision published; written under pubMu

	// mu guards the index, every watcher and the hub-side fields of every
	// stream. The fan-out and the catch-up path hold it while they hand
	// responses to streams, never while they read History.
	//
	// Lock order: mu, then pubMu (direct delivery) or a Stream's mu (a
	// stream's outbox is filled with mu held); pubMu may be taken alone.
	// Never take mu with pubMu or a Stream's mu held.
	mu         sync.Mutex
	closed     bool
	running    bool // the fan-out runs (tests stage states without it)
	index      *index
	streams    map[*Stream]struct{}
	fanRev     int64     // every synced watcher was given all events <= fanRev
	lagStreams []*Stream // streams with lagging watchers
	lagCursor  int       // where the next catch-up round starts in lagStreams
	progressQ  []*Stream // streams with a deferred progress request
	fo         fanOut    // the scratch of the fan-out and of direct delivery
	pass       uint64    // fan-out pass counter (group.mark)
	// groupPasses counts the groups the fan-out and the catch-up path
	// delivered events to: it identifies one group's events of one pass,
	// which a stream's budget counts once (Stream.chargeShared).
	groupPasses uint64

	fanWake     chan struct{}
	catchUpWake chan struct{}
	done        chan struct{}
	wg          sync.WaitGroup
}

// publication is one backlog item: the events of revisions first..last,
// or, when resync is set, a gap: every synced watcher must re-read
// first..last (and whatever follows) from History.
type publication struct {
	first, last int64
	events      []mvccpb.Event
	resync      bool
}

// NewHub starts a hub that continues from the history's current revision.
func NewHub(hist History, opts Options) (*Hub, error) {
	h, err := newHub(hist, opts)
	if err != nil {
		return nil, err
	}
	h.start()
	return h, nil
}

// newHub builds a hub without starting its goroutines.
func newHub(hist History, opts Options) (*Hub, error) {
	if hist == nil {
		return nil, errors.New("watch: no history")
	}
	if opts.ErrCompacted == nil {
		return nil, errors.New("watch: Options.ErrCompacted is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	interval := opts.ProgressNotifyInterval
	switch {
	case interval <= 0:
		interval = defaultProgressInterval
	case interval < minProgressInterval:
		opts.Logger.Warn("adjusting watch progress notify interval to minimum period",
			"min-watch-progress-notify-interval", minProgressInterval)
		interval = minProgressInterval
	}
	if opts.StreamBufferBytes <= 0 {
		opts.StreamBufferBytes = defaultStreamBufferBytes
	}
	if opts.BacklogEvents <= 0 {
		opts.BacklogEvents = defaultBacklogEvents
	}
	switch {
	case opts.StreamResponseRate == 0:
		opts.StreamResponseRate = defaultResponseRate
	case opts.StreamResponseRate < 0:
		opts.StreamResponseRate = 0
	}
	if opts.StreamResponseBurst <= 0 {
		opts.StreamResponseBurst = defaultResponseBurst
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("watch: register metrics: %w", err)
	}
	h := &Hub{
		log:           opts.Logger,
		hist:          hist,
		errCompacted:  opts.ErrCompacted,
		progress:      interval,
		budget:        opts.StreamBufferBytes,
		backlogLimit:  opts.BacklogEvents,
		responseRate:  opts.StreamResponseRate,
		responseBurst: opts.StreamResponseBurst,
		metrics:       m,
		blocks:        newBlockPool(),
		index:         newIndex(),
		streams:       make(map[*Stream]struct{}),
		fanWake:       make(chan struct{}, 1),
		catchUpWake:   make(chan struct{}, 1),
		done:          make(chan struct{}),
	}
	rev := hist.Rev()
	h.pubRev.Store(rev)
	h.fanRev = rev
	return h, nil
}

// start runs the fan-out and catch-up goroutines. (Tests build a hub
// without them to stage states that are otherwise too short-lived.)
func (h *Hub) start() {
	h.mu.Lock()
	h.running = true
	h.mu.Unlock()
	h.wg.Add(2)
	go h.fanOutLoop()
	go h.catchUpLoop()
}

// Close stops the hub. Every stream's Next returns ErrClosed.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	streams := make([]*Stream, 0, len(h.streams))
	for s := range h.streams {
		streams = append(streams, s)
	}
	h.mu.Unlock()
	close(h.done)
	h.wg.Wait()
	for _, s := range streams {
		s.Close()
	}
}

// Publish hands the hub the events of a commit; rev is the store's
// revision after it. events are in revision order and carry, in
// Kv.ModRevision, their revision (for a DELETE, the deletion's). The hub
// takes ownership of the slice and of the KeyValues it points to: neither
// may be modified afterwards.
//
// Publish never blocks on watchers: it hands a small commit to the
// watchers itself when the fan-out is idle (direct.go), or else appends to
// the backlog and wakes the fan-out. A Publish whose events do not cover every revision since
// the previous one (after the store was restored from a snapshot, say)
// makes every synced watcher catch up from History; Publish(rev, nil)
// after a restore is how to announce the jump.
func (h *Hub) Publish(rev int64, events []mvccpb.Event) {
	select {
	case <-h.done:
		return // closed: nobody will fan out
	default:
	}
	if h.publishDirect(rev, events) {
		return
	}
	h.pubMu.Lock()
	prev := h.pubRev.Load()
	if rev < prev || (rev == prev && len(events) > 0) {
		h.pubMu.Unlock()
		h.log.Error("ignoring watch events that do not follow the published revision",
			"published-revision", prev, "revision", rev, "events", len(events))
		return
	}
	if rev == prev {
		h.pubMu.Unlock()
		return
	}
	if contiguous(prev, rev, events) {
		h.backlog = append(h.backlog, publication{first: prev + 1, last: rev, events: events})
		h.backlogEvents += len(events)
		if h.backlogEvents > h.backlogLimit {
			// The fan-out fell far behind: drop what it has not taken
			// (History has it) and let every synced watcher catch up.
			first := h.backlog[0].first
			clear(h.backlog)
			h.backlog = append(h.backlog[:0], publication{first: first, last: rev, resync: true})
			h.backlogEvents = 0
		}
	} else {
		h.log.Info("watch events skip revisions, resynchronising watchers from history",
			"published-revision", prev, "revision", rev)
		if n := len(h.backlog); n > 0 && h.backlog[n-1].resync {
			h.backlog[n-1].last = rev
		} else {
			h.backlog = append(h.backlog, publication{first: prev + 1, last: rev, resync: true})
		}
	}
	h.pubRev.Store(rev)
	h.pubMu.Unlock()
	signal(h.fanWake)
}

// contiguous reports whether events hold revisions prev+1..rev, each at
// least once, in order.
func contiguous(prev, rev int64, events []mvccpb.Event) bool {
	cur := prev
	for i := range events {
		switch r := events[i].Kv.ModRevision; {
		case r == cur && i > 0: // another event of the same revision
		case r == cur+1:
			cur = r
		default:
			return false
		}
	}
	return cur == rev
}

// signal wakes the goroutine waiting on c without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// takeBacklog removes the next run of publications to fan out: a resync
// gap alone, or consecutive event publications up to fanOutBatchEvents.
func (h *Hub) takeBacklog(dst []publication) []publication {
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	n, events := 0, 0
	for n < len(h.backlog) {
		p := &h.backlog[n]
		if p.resync {
			if n == 0 {
				n = 1
			}
			break
		}
		if n > 0 && events+len(p.events) > fanOutBatchEvents {
			break
		}
		events += len(p.events)
		n++
	}
	dst = append(dst, h.backlog[:n]...)
	h.backlogEvents -= events
	rest := copy(h.backlog, h.backlog[n:])
	clear(h.backlog[rest:])
	h.backlog = h.backlog[:rest]
	return dst
}

// fanOutLoop hands published events to the synced watchers.
func (h *Hub) fanOutLoop() {
	defer h.wg.Done()
	var run []publication
	for {
		select {
		case <-h.fanWake:
		case <-h.done:
			return
		}
		for {
			run = h.takeBacklog(run[:0])
			if len(run) == 0 {
				break
			}
			h.mu.Lock()
			if run[0].resync {
				h.resyncLocked(run[0].first, run[0].last)
			} else {
				h.fo.run(h, run)
			}
			h.fanRev = run[len(run)-1].last
			h.retryProgressLocked()
			h.mu.Unlock()
			clear(run)
		}
	}
}

// resyncLocked handles a gap in the publications (first..last): every
// synced watcher that wants any of those revisions goes to the catch-up
// path, from the first one it may have missed.
func (h *Hub) resyncLocked(first, last int64) {
	for s := range h.streams {
		for _, w := range s.watchers {
			if w.state == stateSynced && w.minRev <= last {
				h.lagLocked(w, max(w.minRev, first))
			}
		}
	}
}
