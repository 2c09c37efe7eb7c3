package transport

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// connLogInterval is the least time between two connection-event logs
// about one peer; events in between are counted and the count is reported
// with the next log, so a flapping link does not flood the log.
const connLogInterval = 10 * time.Second

// peer is this member's side of its link to one remote member: the
// outgoing streams the peer opened (one per kind, each with its bounded
// queue, written by serveStream), a reader per stream kind that this
// member keeps open to the peer, a one-slot snapshot queue with its own
// sender, the pipeline's workers and a prober, all ended by stop.
type peer struct {
	t       *Transport
	id      uint64
	label   string // the ID as etcd prints it, for logs and metrics
	log     *slog.Logger
	metrics peerMetrics

	// out are the outgoing streams by kind, nil while the peer has none
	// open; Send reads them without a lock.
	out [numStreamKinds]atomic.Pointer[outStream]
	// pipeline holds messages for the pipeline workers (pipeline.go),
	// used while no stream can carry them.
	pipeline chan raftpb.Message
	// snapq holds at most one snapshot: raft sends the next one to a
	// follower only after the previous was reported.
	snapq chan raftpb.Message
	// redial wakes a reader early when the URLs change; probeNow asks for
	// a probe as soon as the message stream's reader connects.
	redial   [numStreamKinds]chan struct{}
	probeNow chan struct{}
	active   atomic.Bool
	dropped  atomic.Uint64
	// metastore is set once a stream to or from the peer showed it is a
	// MetaStore member: snapshots go only to those (hdrMember).
	metastore atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc

	mu           sync.Mutex
	urls         []string
	urlIndex     int                                // the URL to use next
	streamURL    [numStreamKinds]string             // the URL each reader is attempting or reading
	streamCancel [numStreamKinds]context.CancelFunc // ends that reader's stream
	since        time.Time
	lastErr      string
	roundTrip    time.Duration
	// logs rate-limits connection-event logs per kind of event, so that a
	// new kind (a refusal after timeouts) is logged at once.
	logs map[string]*logLimiter
}

func newPeer(t *Transport, id uint64, urls []string) *peer {
	ctx, cancel := context.WithCancel(t.ctx)
	label := idString(id)
	return &peer{
		t:        t,
		id:       id,
		label:    label,
		log:      t.log.With("peer", label),
		metrics:  t.metrics.forPeer(label),
		pipeline: make(chan raftpb.Message, pipelineQueue),
		snapq:    make(chan raftpb.Message, 1),
		redial:   [numStreamKinds]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)},
		probeNow: make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		urls:     urls,
		since:    time.Now(),
		logs:     map[string]*logLimiter{},
	}
}

// start launches the peer's goroutines; the caller holds t.mu and has
// checked that the transport is not stopped, so t.wg.Wait has not begun.
func (p *peer) start() {
	p.t.wg.Add(2 + int(numStreamKinds) + pipelineWorkers)
	for kind := range numStreamKinds {
		go p.runStream(kind)
	}
	for range pipelineWorkers {
		go p.runPipeline()
	}
	go p.runSnapshots()
	go p.runProbes()
}

// stop ends the peer's goroutines without waiting for them.
func (p *peer) stop() { p.cancel() }

// enqueue queues a copy of m for an outgoing stream: a MsgApp for the
// msgapp stream if the peer opened one, anything for the message stream;
// with neither open, for the pipeline, if the peer is known to be a
// MetaStore member (see hdrMember). It fails (and counts a drop) when
// none of these can take m or the queue is full.
func (p *peer) enqueue(m *raftpb.Message) bool {
	var q chan raftpb.Message
	if m.Type == raftpb.MsgApp {
		if out := p.out[streamMsgApp].Load(); out != nil {
			q = out.msgc
		}
	}
	if q == nil {
		if out := p.out[streamMessage].Load(); out != nil {
			q = out.msgc
		} else if p.metastore.Load() {
			q = p.pipeline
		}
	}
	if q == nil {
		p.drop()
		return false
	}
	queued := *m
	if len(queued.Entries) > 0 {
		// raft may reuse the Entries array once Send returns; the entries'
		// Data is never modified, so sharing it is safe.
		queued.Entries = slices.Clone(queued.Entries)
	}
	select {
	case q <- queued:
		return true
	default:
		p.drop()
		return false
	}
}

// queueSnapshot hands a MsgSnap to the snapshot sender, or reports it
// failed at once if one is already in flight.
func (p *peer) queueSnapshot(m raftpb.Message) {
	if m.Snapshot != nil {
		snap := *m.Snapshot
		m.Snapshot = &snap
	}
	select {
	case p.snapq <- m:
	default:
		p.drop()
		p.t.reportSnapshot(p.id, raft.SnapshotFailure)
	}
}

func (p *peer) drop() {
	p.dropped.Add(1)
	p.metrics.dropped.Inc()
}

func (p *peer) setActive(active bool) {
	if p.active.Swap(active) == active {
		return
	}
	p.mu.Lock()
	p.since = time.Now()
	p.mu.Unlock()
	if active {
		p.metrics.active.Set(1)
	} else {
		p.metrics.active.Set(0)
		p.metrics.disconnected.Inc()
	}
}

func (p *peer) setLastError(err error) {
	p.mu.Lock()
	p.lastErr = err.Error()
	p.mu.Unlock()
}

// setURLs replaces the peer's URLs and ends a reader whose URL is no
// longer listed, so that it reconnects at once.
func (p *peer) setURLs(urls []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Equal(p.urls, urls) {
		return
	}
	p.urls = urls
	p.urlIndex = 0
	for kind := range numStreamKinds {
		if p.streamCancel[kind] != nil && !slices.Contains(urls, p.streamURL[kind]) {
			p.streamCancel[kind]()
		}
		select {
		case p.redial[kind] <- struct{}{}:
		default:
		}
	}
}

// currentURL is the URL readers, snapshots, probes and forwarded requests
// go to: the one that last worked, or the next to try.
func (p *peer) currentURL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.urls[p.urlIndex%len(p.urls)]
}

// nextURL moves on to the peer's next URL after a failed attempt.
func (p *peer) nextURL() {
	p.mu.Lock()
	p.urlIndex = (p.urlIndex + 1) % len(p.urls)
	p.mu.Unlock()
}

func (p *peer) status() PeerStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PeerStatus{
		ID:        p.id,
		URLs:      slices.Clone(p.urls),
		Active:    p.active.Load(),
		Since:     p.since,
		LastError: p.lastErr,
		RoundTrip: p.roundTrip,
		Dropped:   p.dropped.Load(),
	}
}

// logEvent logs a connection event of the given kind unless one of that
// kind was logged about this peer within connLogInterval.
func (p *peer) logEvent(kind string, level slog.Level, msg string, attrs ...any) {
	p.mu.Lock()
	l := p.logs[kind]
	if l == nil {
		l = &logLimiter{every: connLogInterval}
		p.logs[kind] = l
	}
	ok, suppressed := l.allow(time.Now())
	p.mu.Unlock()
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed-events", suppressed)
	}
	p.log.Log(context.Background(), level, msg, attrs...)
}

// runProbes measures the round trip to the peer every ProbeInterval and
// right after its stream connects.
func (p *peer) runProbes() {
	defer p.t.wg.Done()
	ticker := time.NewTicker(p.t.cfg.ProbeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-ticker.C:
		case <-p.probeNow:
		}
		if rtt, err := p.t.probe(p.ctx, p); err == nil {
			p.metrics.roundTrip.Observe(rtt.Seconds())
			p.mu.Lock()
			p.roundTrip = rtt
			p.mu.Unlock()
		} else {
			p.log.Debug("probe failed", "err", err)
		}
	}
}

// logLimiter lets one event through per interval and counts the rest.
type logLimiter struct {
	every      time.Duration
	last       time.Time
	suppressed int
}

func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int) {
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return false, 0
	}
	suppressed, l.suppressed, l.last = l.suppressed, 0, now
	return true, suppressed
}

// backoff paces reconnection attempts: exponential from min to max, each
// pause drawn uniformly from its upper half so that members that lost
// each other at the same moment do not retry in lockstep. The source is
// seeded with the two member IDs, so runs are reproducible.
type backoff struct {
	min, max, cur time.Duration
	rng           *rand.Rand
}

func newBackoff(lo, hi time.Duration, local, remote uint64) *backoff {
	return &backoff{min: lo, max: hi, rng: rand.New(rand.NewPCG(local, remote))}
}

func (b *backoff) next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.min
	case b.cur < b.max:
		b.cur = min(2*b.cur, b.max)
	}
	half := b.cur / 2
	return half + time.Duration(b.rng.Int64N(int64(b.cur-half)+1))
}

func (b *backoff) reset() { b.cur = 0 }
