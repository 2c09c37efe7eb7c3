package raftnode

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"

	"github.com/metastore-io/metastore/test/raftkit"
)

// logSink collects a test's logs and prints them only if the test fails,
// so goroutines still logging after a test ends cannot trip testing.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func testLogger(t testing.TB) *slog.Logger {
	sink := &logSink{}
	t.Cleanup(func() {
		if t.Failed() {
			sink.mu.Lock()
			t.Logf("node logs:\n%s", sink.buf.String())
			sink.mu.Unlock()
		}
	})
	return slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func testConfig(t testing.TB, dir string) Config {
	return Config{
		ID:             1,
		ClusterID:      0xc1,
		DataDir:        dir,
		TickInterval:   10 * time.Millisecond,
		ElectionTicks:  10,
		HeartbeatTicks: 1,
		SnapshotCount:  1_000_000,
		Logger:         testLogger(t),
	}
}

func mustStart(t testing.TB, cfg Config, sm StateMachine) *Node {
	t.Helper()
	n, err := Start(cfg, sm)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(n.Stop)
	return n
}

// waitLeader waits until n knows a leader and returns it.
func waitLeader(t testing.TB, n *Node) uint64 {
	t.Helper()
	deadline := time.NewTimer(raftkit.Timeout)
	defer deadline.Stop()
	for {
		changed := n.leaderChanged.next()
		if lead := n.lead.Load(); lead != raft.None {
			return lead
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("member %x: no leader within %v", n.cfg.ID, raftkit.Timeout)
		}
	}
}

// proposeAll proposes every payload, retrying ones raft dropped (a
// proposal can be lost around a leader change; the caller retries).
func proposeAll(t *testing.T, n *Node, payloads []string) {
	t.Helper()
	ctx := raftkit.Context(t)
	for _, p := range payloads {
		if err := n.Propose(ctx, []byte(p)); err != nil {
			t.Errorf("propose %q: %v", p, err)
			return
		}
	}
}

// memNetwork connects in-process members: one queue and delivery goroutine
// per destination, and a switch to cut members off.
type memNetwork struct {
	mu       sync.Mutex
	nodes    map[uint64]*Node
	queues   map[uint64]chan raftpb.Message
	isolated map[uint64]bool
	wg       sync.WaitGroup
}

func newMemNetwork(t *testing.T, ids ...uint64) *memNetwork {
	net := &memNetwork{
		nodes:    map[uint64]*Node{},
		queues:   map[uint64]chan raftpb.Message{},
		isolated: map[uint64]bool{},
	}
	for _, id := range ids {
		q := make(chan raftpb.Message, 4096)
		net.queues[id] = q
		net.wg.Add(1)
		go net.deliverLoop(id, q)
	}
	t.Cleanup(func() {
		for _, q := range net.queues {
			close(q)
		}
		net.wg.Wait()
	})
	return net
}

func (net *memNetwork) attach(n *Node) {
	net.mu.Lock()
	net.nodes[n.cfg.ID] = n
	net.mu.Unlock()
}

func (net *memNetwork) isolate(id uint64, cut bool) {
	net.mu.Lock()
	net.isolated[id] = cut
	net.mu.Unlock()
}

func (net *memNetwork) node(id uint64) *Node {
	net.mu.Lock()
	defer net.mu.Unlock()
	return net.nodes[id]
}

func (net *memNetwork) transport(id uint64) Transport { return &memTransport{net: net, from: id} }

func (net *memNetwork) deliverLoop(to uint64, q chan raftpb.Message) {
	defer net.wg.Done()
	for m := range q {
		target := net.node(to)
		if target == nil {
			continue
		}
		if m.Type == raftpb.MsgSnap {
			net.shipSnapshot(m, target)
		}
		// Errors mean the target stopped; the message is lost like on a
		// real network.
		_ = target.Step(context.Background(), m)
	}
}

// shipSnapshot does what a network transport does for a MsgSnap: stream
// the sender's snapshot file into the receiver's store before the message
// is stepped, and report the outcome to the sender.
func (net *memNetwork) shipSnapshot(m raftpb.Message, target *Node) {
	sender := net.node(m.From)
	if sender == nil {
		return
	}
	status := raft.SnapshotFinish
	if err := copySnapshot(sender, target, m.Snapshot.Metadata); err != nil {
		status = raft.SnapshotFailure
	}
	sender.ReportSnapshot(m.To, status)
}

type readerImage struct{ r io.Reader }

func (ri readerImage) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, ri.r) }

type memTransport struct {
	net  *memNetwork
	from uint64
}

func (t *memTransport) Send(msgs []raftpb.Message) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	for _, m := range msgs {
		if t.net.isolated[t.from] || t.net.isolated[m.To] {
			continue // lost on the wire
		}
		q, ok := t.net.queues[m.To]
		if !ok {
			continue
		}
		// raft may reuse the backing arrays of Entries once Send returns.
		m.Entries = append([]raftpb.Entry(nil), m.Entries...)
		select {
		case q <- m:
		default:
			if sender := t.net.nodes[t.from]; sender != nil {
				go sender.ReportUnreachable(m.To)
			}
		}
	}
}

func (t *memTransport) Attach(Local) {}

// copySnapshot streams the sender's snapshot file for meta into the
// receiver's store.
func copySnapshot(from, to *Node, meta raftpb.SnapshotMetadata) error {
	img, err := from.Snapshots().OpenImage(raftsnap.Ref{Term: meta.Term, Index: meta.Index})
	if err != nil {
		return err
	}
	defer img.Close()
	_, err = to.Snapshots().Save(img.Metadata, readerImage{r: img})
	return err
}

// raftApplied is the index raft counts applied.
func raftApplied(n *Node) uint64 {
	var applied uint64
	n.raft.with(func(rn *raft.RawNode) { applied = rn.BasicStatus().Applied })
	return applied
}
