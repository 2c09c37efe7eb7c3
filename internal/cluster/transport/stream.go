package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// maxIdlePending is the largest encoding buffer a stream keeps between
// messages; a bigger one (left by a huge message) is released.
const maxIdlePending = 4 << 20

var errStreamClosed = errors.New("stream closed")

// runStream keeps one outgoing message stream to the peer open,
// reconnecting with backoff until the peer is stopped.
func (p *peer) runStream() {
	defer p.t.wg.Done()
	bo := newBackoff(p.t.cfg.BackoffMin, p.t.cfg.BackoffMax, p.t.cfg.ID, p.id)
	failures := 0
	for {
		url := p.currentURL()
		connected, err := p.streamOnce(url, failures)
		if p.ctx.Err() != nil {
			return
		}
		// The status is updated before the log line so that whoever sees
		// the line also sees the error in PeerStatus.
		p.setLastError(err)
		if connected {
			bo.reset()
			failures = 0
			p.logEvent("lost", slog.LevelWarn, "lost message stream to peer", "url", url, "err", err)
		} else {
			failures++
			p.nextURL()
			kind, level := "unreachable", slog.LevelWarn
			var refused *refusedError
			if errors.As(err, &refused) {
				// Not ready yet (starting) is routine; any other refusal
				// is a misconfiguration someone must fix.
				kind, level = fmt.Sprintf("refused-%d", refused.status), slog.LevelError
				if refused.status == http.StatusServiceUnavailable {
					level = slog.LevelInfo
				}
			}
			p.logEvent(kind, level, "cannot open message stream to peer", "url", url, "attempt", failures, "err", err)
		}
		timer := time.NewTimer(bo.next())
		select {
		case <-p.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-p.redial:
			timer.Stop()
		}
	}
}

// streamOnce opens a stream to url and feeds it from the queue until it
// breaks. connected says whether the peer accepted it.
func (p *peer) streamOnce(url string, failures int) (connected bool, err error) {
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	p.mu.Lock()
	p.streamURL, p.streamCancel = url, cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.streamURL, p.streamCancel = "", nil
		p.mu.Unlock()
	}()

	// The HTTP/2 client notices a cancelled context only between body
	// reads, so the body watches the context itself.
	body := &streamBody{p: p, max: p.t.cfg.MaxFrameSize, closed: make(chan struct{}), done: ctx.Done()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+pathStream, body)
	if err != nil {
		return false, fmt.Errorf("build stream request: %w", err)
	}
	p.t.setIdentity(req.Header, p.id)
	// The peer answers the headers at once and then only reads: waiting
	// longer than HandshakeTimeout for them means it is not serving.
	handshake := time.AfterFunc(p.t.cfg.HandshakeTimeout, cancel)
	resp, err := p.t.streams.Do(req)
	if !handshake.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		return false, fmt.Errorf("%w: no answer to the stream request within %v", ErrUnreachable, p.t.cfg.HandshakeTimeout)
	}
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, p.t.refusal(p.id, url, resp)
	}
	// Nor does a response body read notice it: closing the body aborts
	// the HTTP/2 stream, which is what ends the read below.
	defer context.AfterFunc(ctx, func() { resp.Body.Close() })()

	p.setActive(true)
	p.logEvent("connected", slog.LevelInfo, "message stream to peer connected", "url", url, "failed-attempts", failures)
	select {
	case p.probeNow <- struct{}{}:
	default:
	}
	// The peer never writes to the response: reading it returns when the
	// stream ends, whichever side ended it.
	_, err = io.Copy(io.Discard, resp.Body)
	p.setActive(false)
	cancel()
	p.dropQueued()
	p.t.reportUnreachable(p.id)
	if err == nil {
		err = errors.New("peer closed the stream")
	}
	return true, err
}

// streamBody is the request body of an outgoing stream: each Read blocks
// for the first queued message, then encodes as many more as are queued
// and fit, so a burst goes out in one DATA frame and one write, and a lone
// heartbeat goes out at once (the HTTP/2 client flushes after every
// Read). Only the client's body-writing goroutine calls Read.
type streamBody struct {
	p       *peer
	max     int
	pending []byte // the encoding of a message that did not fit a Read
	off     int
	closed  chan struct{}
	once    sync.Once
	done    <-chan struct{} // the stream's context
}

func (b *streamBody) Read(buf []byte) (int, error) {
	n := 0
	if b.off < len(b.pending) {
		n = copy(buf, b.pending[b.off:])
		b.off += n
		if b.off < len(b.pending) {
			return n, nil
		}
		b.resetPending()
	}
	msgs, bytes := 0, 0
	defer func() {
		b.p.metrics.sentMessages.Add(float64(msgs))
		b.p.metrics.sentBytes.Add(float64(bytes))
	}()
	for n < len(buf) {
		var m raftpb.Message
		if n == 0 {
			select {
			case m = <-b.p.queue:
			case <-b.closed:
				return 0, errStreamClosed
			case <-b.done:
				return 0, errStreamClosed
			}
		} else {
			select {
			case m = <-b.p.queue:
			default:
				return n, nil
			}
		}
		size := m.Size()
		if size > b.max {
			b.p.drop()
			b.p.log.Error("dropping raft message over the frame size limit", "type", m.Type, "bytes", size, "limit", b.max)
			continue
		}
		total := frameHeaderSize + size
		msgs++
		bytes += total
		if total <= len(buf)-n {
			if err := putFrame(buf[n:n+total], &m, size); err != nil {
				return 0, err
			}
			n += total
			continue
		}
		// Encode aside and hand out what fits; the rest goes first next time.
		if cap(b.pending) < total {
			b.pending = make([]byte, total)
		}
		b.pending = b.pending[:total]
		if err := putFrame(b.pending, &m, size); err != nil {
			return 0, err
		}
		b.off = copy(buf[n:], b.pending)
		n += b.off
		return n, nil
	}
	return n, nil
}

func (b *streamBody) resetPending() {
	if cap(b.pending) > maxIdlePending {
		b.pending = nil
	}
	b.pending, b.off = b.pending[:0], 0
}

// Close is called by the HTTP/2 client, possibly while Read blocks.
func (b *streamBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// serveStream receives one peer's message stream and steps each message
// into raft, in order.
func (t *Transport) serveStream(w http.ResponseWriter, r *http.Request, from uint64, a *attachment) {
	if r.ProtoMajor != 2 {
		http.Error(w, "the raft message stream needs HTTP/2 (cleartext, prior knowledge)", http.StatusHTTPVersionNotSupported)
		return
	}
	in, ok := t.inbound.open(t, from, r)
	if !ok {
		http.Error(w, "transport stopped", http.StatusServiceUnavailable)
		return
	}
	defer t.inbound.finish(t, in)
	w.WriteHeader(http.StatusOK)
	if err := http.NewResponseController(w).Flush(); err != nil {
		return
	}
	label := idString(from)
	receivedBytes := t.metrics.receivedBytes.WithLabelValues(label)
	receivedMessages := t.metrics.receivedMessages.WithLabelValues(label)
	receiveFailures := t.metrics.receivedFailures.WithLabelValues(label)
	// Log through the peer's limiter: a flapping link must not flood.
	logEvent := func(kind string, level slog.Level, msg string, attrs ...any) {
		if p := t.peer(from); p != nil {
			p.logEvent(kind, level, msg, attrs...)
		}
	}
	logEvent("inbound-connected", slog.LevelInfo, "message stream from peer connected", "remote-addr", r.RemoteAddr)

	fr := newFrameReader(r.Body, t.cfg.MaxFrameSize)
	for {
		var m raftpb.Message
		n, err := fr.readMessage(&m)
		if err != nil {
			if in.ctx.Err() == nil && !errors.Is(err, io.EOF) {
				receiveFailures.Inc()
				logEvent("inbound-broken", slog.LevelWarn, "message stream from peer broke", "err", err)
			}
			return
		}
		receivedBytes.Add(float64(n))
		receivedMessages.Inc()
		if m.To != t.cfg.ID || m.From != from || m.Type == raftpb.MsgSnap {
			// A snapshot must come with its image, on the snapshot path.
			logEvent("misaddressed", slog.LevelWarn, "dropping misaddressed message from peer", "type", m.Type,
				"from", idString(m.From), "to", idString(m.To))
			continue
		}
		if err := a.raft.Step(in.ctx, m); err != nil {
			if in.ctx.Err() != nil {
				return
			}
			t.log.Debug("raft refused a message from peer", "peer", label, "type", m.Type, "err", err)
		}
	}
}

// inboundStreams tracks the incoming message stream of each peer: one at a
// time (a reconnecting peer's new stream replaces its old one), closed
// when the peer is removed or the transport stops.
type inboundStreams struct {
	mu     sync.Mutex
	byPeer map[uint64]*inboundStream
}

type inboundStream struct {
	from   uint64
	ctx    context.Context
	cancel context.CancelFunc
	// stopWatching undoes the context hooks below.
	stopWatching []func() bool
}

// open registers a stream from a peer. Its context ends with the request,
// with the transport, or when the stream is replaced or closed; then the
// request body is closed too, which is what unblocks the reader.
func (s *inboundStreams) open(t *Transport, from uint64, r *http.Request) (*inboundStream, bool) {
	if !t.enter() {
		return nil, false
	}
	ctx, cancel := context.WithCancel(r.Context())
	in := &inboundStream{from: from, ctx: ctx, cancel: cancel}
	in.stopWatching = []func() bool{
		context.AfterFunc(t.ctx, cancel),
		context.AfterFunc(ctx, func() { r.Body.Close() }),
	}
	s.mu.Lock()
	if old := s.byPeer[from]; old != nil {
		old.cancel()
	}
	s.byPeer[from] = in
	s.mu.Unlock()
	return in, true
}

func (s *inboundStreams) finish(t *Transport, in *inboundStream) {
	for _, stop := range in.stopWatching {
		stop()
	}
	in.cancel()
	s.mu.Lock()
	if s.byPeer[in.from] == in {
		delete(s.byPeer, in.from)
	}
	s.mu.Unlock()
	t.wg.Done()
}

// close ends the stream from a peer, if any.
func (s *inboundStreams) close(from uint64) {
	s.mu.Lock()
	if in := s.byPeer[from]; in != nil {
		in.cancel()
	}
	s.mu.Unlock()
}

// closeAll ends every incoming stream.
func (s *inboundStreams) closeAll() {
	s.mu.Lock()
	for _, in := range s.byPeer {
		in.cancel()
	}
	s.mu.Unlock()
}

// enter registers a request that Stop must wait for; false once stopping.
func (t *Transport) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.wg.Add(1)
	return true
}
