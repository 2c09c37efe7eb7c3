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

// peer is the sending side towards one remote member: a bounded queue
// drained by the message stream, a one-slot snapshot queue with its own
// sender, and a prober. Three goroutines, all ended by stop.
type peer struct {
	t       *Transport
	id      uint64
	label   string // the ID as etcd prints it, for logs and metrics
	log     *slog.Logger
	metrics peerMetrics

	queue chan raftpb.Message
	// snapq holds at most one snapshot: raft sends the next one to a
	// follower only after the previous was reported.
	snapq chan raftpb.Message
	// redial wakes the stream loop early when the URLs change; probeNow
	// asks for a probe as soon as a stream connects.
	redial   chan struct{}
	probeNow chan struct{}
	active   atomic.Bool
	dropped  atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc

	mu           sync.Mutex
	urls         []string
	urlIndex     int                // the URL to use next
	streamURL    string             // the URL of the stream being attempted or running
	streamCancel context.CancelFunc // ends that stream
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
		queue:    make(chan raftpb.Message, t.cfg.QueueSize),
		snapq:    make(chan raftpb.Message, 1),
		redial:   make(chan struct{}, 1),
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
	p.t.wg.Add(3)
	go p.runStream()
	go p.runSnapshots()
	go p.runProbes()
}

// stop ends the peer's goroutines without waiting for them.
func (p *peer) stop() { p.cancel() }

// enqueue queues a copy of m for the stream. It fails (and counts a drop)
// when the stream is down or the queue is full.
func (p *peer) enqueue(m *raftpb.Message) bool {
	if !p.active.Load() {
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
	case p.queue <- queued:
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

// dropQueued empties the queue after the stream ended: what is left was
// meant for a connection that is gone, and raft resends what matters.
func (p *peer) dropQueued() {
	for {
		select {
		case <-p.queue:
			p.drop()
		default:
			return
		}
	}
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

// setURLs replaces the peer's URLs and ends a stream whose URL is no
// longer listed, so that it reconnects at once.
func (p *peer) setURLs(urls []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Equal(p.urls, urls) {
		return
	}
	p.urls = urls
	p.urlIndex = 0
	if p.streamCancel != nil && !slices.Contains(urls, p.streamURL) {
		p.streamCancel()
	}
	select {
	case p.redial <- struct{}{}:
	default:
	}
}

// currentURL is the URL streams, snapshots, probes and forwarded requests
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
