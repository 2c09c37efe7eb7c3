package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
)

// streamKind is one of etcd's two stream encodings (rafthttp package
// doc). Each peer has one stream of each kind in each direction.
type streamKind int

const (
	// streamMessage carries any message but MsgSnap.
	streamMessage streamKind = iota
	// streamMsgApp carries only MsgApp, in the msgapp v2 encoding.
	streamMsgApp
	numStreamKinds
)

func (k streamKind) path() string {
	if k == streamMsgApp {
		return rafthttp.StreamMsgAppPath
	}
	return rafthttp.StreamMessagePath
}

// String is the stream's name in logs, as etcd names it.
func (k streamKind) String() string {
	if k == streamMsgApp {
		return "stream MsgApp v2"
	}
	return "stream Message"
}

// writeBatchBytes is how much a stream writer encodes before it flushes,
// when more messages are queued: a burst leaves in a few large writes, a
// lone heartbeat at once.
const writeBatchBytes = 64 << 10

// readBufferSize is the buffer between a stream's connection and its
// decoder.
const readBufferSize = 64 << 10

var errStreamReplaced = errors.New("replaced by a newer stream from the same peer")

// outStream is the sending half of one stream to a peer: the peer opened
// it (a GET to this member), and this member writes to the response.
type outStream struct {
	kind   streamKind
	msgc   chan raftpb.Message
	cancel context.CancelCauseFunc
}

// serveStream is the writer of a stream a peer opened: it attaches itself
// as the peer's outgoing stream of its kind (replacing an older one),
// answers 200, and writes queued messages, and a link heartbeat every
// ConnTimeout/3, until the peer goes, the stream is replaced, the peer is
// removed or the transport stops.
func (t *Transport) serveStream(w http.ResponseWriter, r *http.Request, p *peer, kind streamKind) {
	if !t.enter() {
		http.Error(w, "transport stopped", http.StatusServiceUnavailable)
		return
	}
	defer t.wg.Done()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer context.AfterFunc(p.ctx, func() { cancel(errors.New("peer removed or transport stopped")) })()

	out := &outStream{kind: kind, msgc: make(chan raftpb.Message, t.cfg.QueueSize), cancel: cancel}
	if old := p.out[kind].Swap(out); old != nil {
		old.cancel(errStreamReplaced)
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	err := rc.Flush()
	if err == nil {
		if kind == streamMessage {
			p.setActive(true)
		}
		p.logEvent("writer-connected-"+kind.String(), slog.LevelInfo, "established "+kind.String()+" to peer",
			"remote-addr", r.RemoteAddr)
		err = p.writeStream(ctx, w, rc, out)
	}
	current := p.out[kind].CompareAndSwap(out, nil)
	if dropped := p.drain(out); current || dropped > 0 {
		// raft learns its messages may be lost, whether the stream is
		// gone or replaced, and probes instead of pipelining.
		t.reportUnreachable(p.id)
	}
	if current {
		if kind == streamMessage {
			p.setActive(false)
		}
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil && !errors.Is(c, context.Canceled) {
			err = c
		}
		p.setLastError(fmt.Errorf("%s to peer ended: %w", kind, err))
		p.logEvent("writer-lost-"+kind.String(), slog.LevelWarn, "lost TCP streaming connection with remote peer",
			"stream-writer-type", kind.String(), "err", err)
	}
}

// writeStream encodes out's messages onto the response until ctx ends or
// a write fails. Every batch of writes must finish within ConnTimeout.
func (p *peer) writeStream(ctx context.Context, w io.Writer, rc *http.ResponseController, out *outStream) error {
	bw := bufio.NewWriterSize(w, writeBatchBytes)
	var enc interface{ Encode(*raftpb.Message) error }
	if out.kind == streamMsgApp {
		enc = rafthttp.NewAppEncoder(bw)
	} else {
		enc = rafthttp.NewMessageEncoder(bw)
	}
	heartbeat := time.NewTicker(p.t.cfg.ConnTimeout / 3)
	defer heartbeat.Stop()
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	for {
		var m raftpb.Message
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-heartbeat.C:
			if err := rc.SetWriteDeadline(time.Now().Add(p.t.cfg.ConnTimeout)); err != nil {
				return err
			}
			if err := enc.Encode(&rafthttp.LinkHeartbeat); err != nil {
				return err
			}
			if err := flush(); err != nil {
				return err
			}
			continue
		case m = <-out.msgc:
		}
		// A batch: this message and whatever else is queued, up to
		// writeBatchBytes, then one flush.
		if err := rc.SetWriteDeadline(time.Now().Add(p.t.cfg.ConnTimeout)); err != nil {
			return err
		}
		msgs, bytes := 0, 0
		for {
			if size := m.Size(); size > p.t.cfg.MaxFrameSize {
				p.drop()
				p.log.Error("dropping raft message over the frame size limit", "type", m.Type, "bytes", size, "limit", p.t.cfg.MaxFrameSize)
			} else {
				if err := enc.Encode(&m); err != nil {
					return err
				}
				msgs++
				bytes += 8 + size
			}
			if bytes >= writeBatchBytes || len(out.msgc) == 0 {
				break
			}
			m = <-out.msgc
		}
		err := flush()
		p.metrics.sentMessages.Add(float64(msgs))
		p.metrics.sentBytes.Add(float64(bytes))
		if err != nil {
			return err
		}
	}
}

// drain drops what is left in a stream's queue after it ended, and says
// how much: it was meant for a connection that is gone, and raft resends
// what matters.
func (p *peer) drain(out *outStream) (dropped int) {
	for {
		select {
		case <-out.msgc:
			p.drop()
			dropped++
		default:
			return dropped
		}
	}
}

// runStream keeps this member's reader of one stream kind from the peer
// open: it dials the peer's stream endpoint, steps what arrives into
// raft, and reconnects with backoff until the peer is stopped.
func (p *peer) runStream(kind streamKind) {
	defer p.t.wg.Done()
	select {
	case <-p.ctx.Done():
		return
	case <-p.t.attachedc:
	}
	bo := newBackoff(p.t.cfg.BackoffMin, p.t.cfg.BackoffMax, p.t.cfg.ID, p.id^uint64(kind))
	failures := 0
	for {
		url := p.currentURL()
		connected, err := p.readStreamOnce(kind, url, failures)
		if p.ctx.Err() != nil {
			return
		}
		// The status is updated before the log line so that whoever sees
		// the line also sees the error in PeerStatus.
		p.setLastError(err)
		if connected {
			bo.reset()
			failures = 0
			p.logEvent("reader-lost-"+kind.String(), slog.LevelWarn, "lost TCP streaming connection with remote peer",
				"stream-reader-type", kind.String(), "url", url, "err", err)
		} else {
			failures++
			if kind == streamMessage {
				p.nextURL()
			}
			event, level := "unreachable", slog.LevelWarn
			var refused *refusedError
			if errors.As(err, &refused) {
				// Not ready yet (starting) is routine; any other refusal
				// is a misconfiguration someone must fix.
				event, level = fmt.Sprintf("refused-%d", refused.status), slog.LevelError
				if refused.status == http.StatusServiceUnavailable {
					level = slog.LevelInfo
				}
			}
			p.logEvent(event+"-"+kind.String(), level, "cannot open "+kind.String()+" from peer",
				"url", url, "attempt", failures, "err", err)
		}
		timer := time.NewTimer(bo.next())
		select {
		case <-p.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-p.redial[kind]:
			timer.Stop()
		}
	}
}

// readStreamOnce opens one stream from url and steps its messages until it
// breaks. connected says whether the peer accepted it.
func (p *peer) readStreamOnce(kind streamKind, url string, failures int) (connected bool, err error) {
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	p.mu.Lock()
	p.streamURL[kind], p.streamCancel[kind] = url, cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.streamURL[kind], p.streamCancel[kind] = "", nil
		p.mu.Unlock()
	}()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+kind.path()+"/"+idString(p.t.cfg.ID), nil)
	if err != nil {
		return false, fmt.Errorf("build stream request: %w", err)
	}
	p.t.setIdentity(req.Header, p.id)
	// The peer answers the headers at once and then only writes: waiting
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
	if resp.Header.Get(hdrMember) != memberV1 {
		return false, &refusedError{status: resp.StatusCode, msg: etcdPeerError(p.id, url, resp.Header).Error()}
	}
	p.metastore.Store(true)
	// A body read does not notice a cancelled context by itself; closing
	// the body ends it.
	defer context.AfterFunc(ctx, func() { resp.Body.Close() })()
	p.logEvent("reader-connected-"+kind.String(), slog.LevelInfo, "established "+kind.String()+" from peer",
		"url", url, "failed-attempts", failures)
	if kind == streamMessage {
		select {
		case p.probeNow <- struct{}{}:
		default:
		}
	}
	err = p.readStream(ctx, kind, bufio.NewReaderSize(resp.Body, readBufferSize))
	p.t.reportUnreachable(p.id)
	if err == nil || errors.Is(err, io.EOF) {
		err = errors.New("peer closed the stream")
	}
	return true, err
}

// readStream decodes a stream's messages and steps each into raft, in
// order, dropping link heartbeats and anything not from the peer to this
// member (a MsgSnap must come with its image, by POST).
func (p *peer) readStream(ctx context.Context, kind streamKind, r io.Reader) error {
	var dec interface {
		Decode() (raftpb.Message, error)
	}
	limit := uint64(p.t.cfg.MaxFrameSize)
	if kind == streamMsgApp {
		dec = rafthttp.NewAppDecoder(r, p.t.cfg.ID, p.id, limit)
	} else {
		dec = rafthttp.NewMessageDecoder(r, limit)
	}
	a := p.t.attached()
	received := p.t.metrics.receivedBytes.WithLabelValues(p.label)
	messages := p.t.metrics.receivedMessages.WithLabelValues(p.label)
	failures := p.t.metrics.receivedFailures.WithLabelValues(p.label)
	for {
		m, err := dec.Decode()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) {
				failures.Inc()
			}
			return err
		}
		if rafthttp.IsLinkHeartbeat(&m) {
			continue
		}
		received.Add(float64(8 + m.Size()))
		messages.Inc()
		if m.To != p.t.cfg.ID || m.From != p.id || m.Type == raftpb.MsgSnap {
			p.logEvent("misaddressed", slog.LevelWarn, "dropping misaddressed message from peer", "type", m.Type,
				"from", idString(m.From), "to", idString(m.To))
			continue
		}
		if err := a.raft.Step(ctx, m); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.log.Debug("raft refused a message from peer", "type", m.Type, "err", err)
		}
	}
}

// servePipeline steps one message a peer POSTed (etcd's pipeline, which
// etcd members use while their streams are down).
func (t *Transport) servePipeline(w http.ResponseWriter, r *http.Request, from uint64, a *attachment) {
	if !t.enter() {
		http.Error(w, "transport stopped", http.StatusServiceUnavailable)
		return
	}
	defer t.wg.Done()
	label := idString(from)
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(t.cfg.MaxFrameSize)+1))
	if err != nil || len(body) > t.cfg.MaxFrameSize {
		t.metrics.receivedFailures.WithLabelValues(label).Inc()
		http.Error(w, "error reading raft message", http.StatusBadRequest)
		return
	}
	var m raftpb.Message
	if err := m.Unmarshal(body); err != nil || m.Type == raftpb.MsgSnap || m.To != t.cfg.ID {
		t.metrics.receivedFailures.WithLabelValues(label).Inc()
		http.Error(w, "error unmarshalling raft message", http.StatusBadRequest)
		return
	}
	t.metrics.receivedBytes.WithLabelValues(label).Add(float64(len(body)))
	t.metrics.receivedMessages.WithLabelValues(label).Inc()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()
	if err := a.raft.Step(ctx, m); err != nil && ctx.Err() == nil {
		t.log.Debug("raft refused a pipelined message", "peer", label, "type", m.Type, "err", err)
	}
	w.WriteHeader(http.StatusNoContent)
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
