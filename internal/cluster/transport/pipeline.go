package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
)

// The pipeline, as etcd's: while the peer has no stream open to this
// member that can carry a message, the message is POSTed on its own to the
// peer's rafthttp.PipelinePath. That is how a member reaches a peer that
// cannot reach it back: its streams are opened by the peer, and a peer
// that this member refuses (a client certificate that does not name the
// address it dials from, say) never opens one.
const (
	// pipelineQueue is how many messages may wait for the pipeline;
	// beyond that Send drops (etcd's pipelineBufSize).
	pipelineQueue = 64
	// pipelineWorkers POST at once, one message each (etcd's
	// connPerPipeline).
	pipelineWorkers = 4
)

// runPipeline is one pipeline worker: it POSTs queued messages until the
// peer is stopped. A message that does not get a 204 is dropped and raft
// told the peer is unreachable.
func (p *peer) runPipeline() {
	defer p.t.wg.Done()
	for {
		var m raftpb.Message
		select {
		case <-p.ctx.Done():
			return
		case m = <-p.pipeline:
		}
		if err := p.post(&m); err != nil {
			p.drop()
			p.t.reportUnreachable(p.id)
			p.logEvent("pipeline-failed", slog.LevelWarn, "failed to send raft message over the pipeline",
				"type", m.Type, "err", err)
			continue
		}
		p.metrics.sentMessages.Inc()
	}
}

// post sends one message and waits for the peer to take it.
func (p *peer) post(m *raftpb.Message) error {
	body, err := m.Marshal()
	if err != nil {
		return fmt.Errorf("marshal %s: %w", m.Type, err)
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.t.cfg.HandshakeTimeout)
	defer cancel()
	url := p.currentURL()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+rafthttp.PipelinePath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build pipeline request: %w", err)
	}
	p.t.setIdentity(req.Header, p.id)
	req.Header.Set("Content-Type", "application/protobuf")
	resp, err := p.t.calls.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return p.t.refusal(p.id, url, resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxRefusalBody)) // lets the connection be reused
	p.metrics.sentBytes.Add(float64(len(body)))
	return nil
}
