package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
	"github.com/metastore-io/metastore/internal/format/raftsnap"
)

// maxImageSize is a sanity bound on a received image's declared size.
const maxImageSize = 1 << 40

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// runSnapshots sends the peer's snapshots, one at a time.
func (p *peer) runSnapshots() {
	defer p.t.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			// A snapshot still queued will never go: say so, so that raft
			// resumes probing the follower if it is still running.
			select {
			case <-p.snapq:
				p.t.reportSnapshot(p.id, raft.SnapshotFailure)
			default:
			}
			return
		case m := <-p.snapq:
			p.sendSnapshot(m)
		}
	}
}

// sendSnapshot streams m with its image and reports the outcome to raft.
func (p *peer) sendSnapshot(m raftpb.Message) {
	start := time.Now()
	inflight := p.t.metrics.snapshotSendInflight.WithLabelValues(p.label)
	inflight.Inc()
	size, err := p.streamSnapshot(m)
	inflight.Dec()
	meta := m.Snapshot.Metadata
	took := time.Since(start)
	if err != nil {
		p.drop()
		p.t.metrics.snapshotSendFailures.WithLabelValues(p.label).Inc()
		p.logEvent("snapshot-failed", slog.LevelWarn, "failed to send snapshot", "index", meta.Index, "term", meta.Term, "took", took, "err", err)
		p.t.reportSnapshot(p.id, raft.SnapshotFailure)
		return
	}
	p.t.metrics.snapshotSent.WithLabelValues(p.label).Inc()
	p.t.metrics.snapshotSendSeconds.WithLabelValues(p.label).Observe(took.Seconds())
	p.log.Info("sent snapshot", "index", meta.Index, "term", meta.Term, "image-bytes", size, "took", took)
	p.t.reportSnapshot(p.id, raft.SnapshotFinish)
}

// streamSnapshot POSTs to the peer's rafthttp.SnapshotPath the body
//
//	MsgSnap ("message" encoding) | image length u64 | image | crc32c(image) u32
//
// marked with hdrSnapshotImage (an etcd member sends its bbolt database
// after the message instead),
// and waits for the peer to acknowledge it stored the image and stepped
// the message.
func (p *peer) streamSnapshot(m raftpb.Message) (int64, error) {
	if m.Snapshot == nil {
		return 0, errors.New("MsgSnap without a snapshot")
	}
	if !p.metastore.Load() {
		// An etcd member would store the image as its bbolt database.
		return 0, fmt.Errorf("peer %s is not known to be a MetaStore member yet: no stream to or from it has connected", p.label)
	}
	a := p.t.attached()
	if a == nil || a.snapshots == nil {
		return 0, errors.New("no snapshot store attached")
	}
	meta := m.Snapshot.Metadata
	img, err := a.snapshots().OpenImage(raftsnap.Ref{Term: meta.Term, Index: meta.Index})
	if err != nil {
		return 0, fmt.Errorf("open snapshot image: %w", err)
	}
	defer img.Close()
	var head bytes.Buffer
	if err := rafthttp.NewMessageEncoder(&head).Encode(&m); err != nil {
		return 0, err
	}
	prefix := binary.BigEndian.AppendUint64(head.Bytes(), uint64(img.Size))

	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	var ack *time.Timer
	var ackMu sync.Mutex
	body := &snapshotBody{prefix: prefix, image: img, left: img.Size, onEnd: func() {
		// The image is out; the peer must now fsync it and answer.
		ackMu.Lock()
		ack = time.AfterFunc(p.t.cfg.SnapshotAckTimeout, cancel)
		ackMu.Unlock()
	}}
	defer func() {
		ackMu.Lock()
		if ack != nil {
			ack.Stop()
		}
		ackMu.Unlock()
	}()
	url := p.currentURL()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+rafthttp.SnapshotPath, body)
	if err != nil {
		return 0, fmt.Errorf("build snapshot request: %w", err)
	}
	req.ContentLength = int64(len(prefix)) + img.Size + crc32.Size
	p.t.setIdentity(req.Header, p.id)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(hdrSnapshotImage, snapshotImageV1)
	resp, err := p.t.calls.Do(req)
	if err != nil {
		if failure := body.readFailure(); failure != nil {
			return 0, failure
		}
		return 0, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return 0, p.t.refusal(p.id, url, resp)
	}
	return img.Size, nil
}

// snapshotBody reads the prefix, then the image (checksumming it), then
// the checksum. Only the HTTP client's body writer calls Read.
type snapshotBody struct {
	prefix  []byte
	image   io.Reader
	left    int64
	crc     uint32
	trailer []byte
	onEnd   func()
	ended   bool
	scratch [1]byte
	// failure is why reading the image failed, if it did; set by the
	// client's body writer, read after Do returns.
	failureMu sync.Mutex
	failure   error
}

func (b *snapshotBody) fail(err error) error {
	b.failureMu.Lock()
	b.failure = err
	b.failureMu.Unlock()
	return err
}

func (b *snapshotBody) readFailure() error {
	b.failureMu.Lock()
	defer b.failureMu.Unlock()
	return b.failure
}

func (b *snapshotBody) Read(p []byte) (int, error) {
	switch {
	case len(b.prefix) > 0:
		n := copy(p, b.prefix)
		b.prefix = b.prefix[n:]
		return n, nil
	case b.left > 0:
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
		n, err := b.image.Read(p)
		b.crc = crc32.Update(b.crc, castagnoli, p[:n])
		b.left -= int64(n)
		if err == io.EOF && b.left > 0 {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return n, b.fail(fmt.Errorf("read snapshot image: %w", err))
		}
		return n, nil
	case b.trailer == nil:
		// One more read lets the file reader verify its own checksum.
		if _, err := b.image.Read(b.scratch[:]); err != io.EOF {
			if err == nil {
				err = errors.New("image longer than its header says")
			}
			return 0, b.fail(fmt.Errorf("read snapshot image: %w", err))
		}
		b.trailer = binary.BigEndian.AppendUint32(make([]byte, 0, crc32.Size), b.crc)
		fallthrough
	case len(b.trailer) > 0:
		n := copy(p, b.trailer)
		b.trailer = b.trailer[n:]
		return n, nil
	}
	if !b.ended {
		b.ended = true
		b.onEnd()
	}
	return 0, io.EOF
}

// serveSnapshot receives a snapshot: it stores the image through the
// member's snapshot store (durable before anyone may use it) and only then
// steps the MsgSnap, as raftnode requires.
func (t *Transport) serveSnapshot(w http.ResponseWriter, r *http.Request, from uint64, a *attachment) {
	if r.Header.Get(hdrSnapshotImage) != snapshotImageV1 {
		// An etcd member's snapshot: its bbolt database, which this member
		// cannot take yet. The sender reports the snapshot failed.
		t.metrics.snapshotRecvFailures.WithLabelValues(idString(from)).Inc()
		t.logRefusal(from, http.StatusUnsupportedMediaType, "snapshot in etcd's bbolt format: this member takes only MetaStore images", r.RemoteAddr)
		http.Error(w, "failed to save KV snapshot (snapshot in etcd's bbolt format is not supported by this member)", http.StatusUnsupportedMediaType)
		return
	}
	if !t.enter() {
		http.Error(w, "transport stopped", http.StatusServiceUnavailable)
		return
	}
	defer t.wg.Done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()
	// Stop must not wait for a sender that stalls mid-image: closing the
	// body ends the read.
	defer context.AfterFunc(ctx, func() { r.Body.Close() })()

	start := time.Now()
	label := idString(from)
	inflight := t.metrics.snapshotRecvInflight.WithLabelValues(label)
	inflight.Inc()
	m, size, err := t.receiveSnapshot(ctx, r.Body, from, a)
	inflight.Dec()
	took := time.Since(start)
	if err != nil {
		t.metrics.snapshotRecvFailures.WithLabelValues(label).Inc()
		t.log.Warn("failed to receive snapshot", "peer", label, "took", took, "err", err)
		code := http.StatusInternalServerError
		var bad *badRequestError
		if errors.As(err, &bad) {
			code = http.StatusBadRequest
		}
		http.Error(w, err.Error(), code)
		return
	}
	t.metrics.snapshotReceived.WithLabelValues(label).Inc()
	t.metrics.snapshotReceiveSecond.WithLabelValues(label).Observe(took.Seconds())
	t.log.Info("received snapshot", "peer", label, "index", m.Snapshot.Metadata.Index,
		"term", m.Snapshot.Metadata.Term, "image-bytes", size, "took", took)
	w.WriteHeader(http.StatusNoContent)
}

type badRequestError struct{ err error }

func (e *badRequestError) Error() string { return e.err.Error() }
func (e *badRequestError) Unwrap() error { return e.err }

func (t *Transport) receiveSnapshot(ctx context.Context, body io.Reader, from uint64, a *attachment) (raftpb.Message, int64, error) {
	if a.snapshots == nil {
		return raftpb.Message{}, 0, errors.New("no snapshot store attached")
	}
	store := a.snapshots()
	if store == nil {
		return raftpb.Message{}, 0, errors.New("member has no snapshot store yet")
	}
	br := bufio.NewReaderSize(body, readBufferSize)
	m, size, err := readSnapshotHeader(br, uint64(t.cfg.MaxFrameSize))
	if err != nil {
		return m, 0, &badRequestError{err}
	}
	if m.To != t.cfg.ID || m.From != from {
		return m, 0, &badRequestError{fmt.Errorf("snapshot from %s to %s sent by member %s",
			idString(m.From), idString(m.To), idString(from))}
	}
	meta := m.Snapshot.Metadata
	saveStart := time.Now()
	st, err := store.SaveTimed(meta, &imageReceiver{r: br, size: size})
	if err != nil {
		return m, 0, fmt.Errorf("store snapshot %d: %w", meta.Index, err)
	}
	// etcd's v3 snapshot save: the image from the leader into its file.
	t.metrics.snapshotDBSaveSeconds.Observe(time.Since(saveStart).Seconds())
	t.metrics.snapshotDBFsyncSeconds.Observe(st.Fsync.Seconds())
	if err := a.raft.Step(ctx, m); err != nil {
		return m, 0, fmt.Errorf("step snapshot %d: %w", meta.Index, err)
	}
	return m, size, nil
}

// readSnapshotHeader reads the MsgSnap (of at most limit bytes) and the
// image length.
func readSnapshotHeader(r io.Reader, limit uint64) (raftpb.Message, int64, error) {
	m, err := rafthttp.NewMessageDecoder(r, limit).Decode()
	if err != nil {
		return m, 0, fmt.Errorf("read snapshot message: %w", noEOF(err))
	}
	if m.Type != raftpb.MsgSnap || m.Snapshot == nil || m.Snapshot.Metadata.Index == 0 || m.Snapshot.Metadata.Term == 0 {
		return m, 0, fmt.Errorf("snapshot request carries %s, not a MsgSnap with a snapshot", m.Type)
	}
	var lenBuf [8]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return m, 0, fmt.Errorf("read snapshot image length: %w", noEOF(err))
	}
	size := binary.BigEndian.Uint64(lenBuf[:])
	if size > maxImageSize {
		return m, 0, fmt.Errorf("snapshot image of %d bytes is over the %d limit", size, int64(maxImageSize))
	}
	return m, int64(size), nil
}

// imageReceiver is the io.WriterTo raftsnap.Store.Save consumes: exactly
// size image bytes, then their checksum, then the end of the body.
type imageReceiver struct {
	r    io.Reader
	size int64
}

func (ir *imageReceiver) WriteTo(w io.Writer) (int64, error) {
	h := crc32.New(castagnoli)
	n, err := io.CopyN(io.MultiWriter(w, h), ir.r, ir.size)
	if err != nil {
		return n, fmt.Errorf("receive snapshot image (%d of %d bytes): %w", n, ir.size, noEOF(err))
	}
	var trailer [crc32.Size + 1]byte
	if _, err := io.ReadFull(ir.r, trailer[:crc32.Size]); err != nil {
		return n, fmt.Errorf("receive snapshot image checksum: %w", noEOF(err))
	}
	if got, want := h.Sum32(), binary.BigEndian.Uint32(trailer[:crc32.Size]); got != want {
		return n, fmt.Errorf("snapshot image checksum mismatch: got %08x, sender computed %08x", got, want)
	}
	if k, err := io.ReadFull(ir.r, trailer[crc32.Size:]); err != io.EOF {
		return n, fmt.Errorf("snapshot request has bytes after the image checksum (read %d, %v)", k, err)
	}
	return n, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
