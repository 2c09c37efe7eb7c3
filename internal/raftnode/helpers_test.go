package raftnode

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
)

// testTimeout bounds every wait in these tests; generous for a loaded
// 2-core machine under -race.
const testTimeout = 30 * time.Second

// fakeSM is an ordered list of applied payloads. It checks the StateMachine
// contract as it goes: entries arrive in index order, each exactly once,
// from one goroutine at a time.
type fakeSM struct {
	mu        sync.Mutex
	state     fakeState
	violation error
	inApply   bool
	restores  int
	changed   chan struct{} // closed and replaced on every change
	// beforeApply, if set, runs (without the lock) before each entry is
	// applied; tests use it to block the apply loop.
	beforeApply func(e raftpb.Entry)
	// veto, if set, decides conf changes (ConfChangeValidator); nil
	// accepts all. vetoing is the index it last vetoed, until applied.
	veto    func(cc raftpb.ConfChangeI) error
	vetoing uint64
	// heldValidations counts ValidateConfChange calls for entries the
	// state machine already held (raft's replay after a restart).
	heldValidations int
}

type fakeState struct {
	Applied  uint64
	Payloads []string
	// ConfChanges counts the conf-change entries applied.
	ConfChanges int
	// Vetoed are the indexes of the conf changes this state machine
	// vetoed, recorded with the state as ValidateConfChange requires.
	Vetoed []uint64
}

// errFakeVeto is the reason a fakeSM gives when asked again about a
// conf change it vetoed before.
var errFakeVeto = errors.New("fakeSM: vetoed")

// ValidateConfChange answers from the veto record for entries it holds,
// and from the veto policy for the next entry.
func (s *fakeSM) ValidateConfChange(index uint64, cc raftpb.ConfChangeI) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index <= s.state.Applied {
		s.heldValidations++
		if slices.Contains(s.state.Vetoed, index) {
			return errFakeVeto
		}
		return nil
	}
	if index != s.state.Applied+1 {
		s.violate(fmt.Errorf("conf change %d validated with only %d entries applied", index, s.state.Applied))
	}
	if s.veto == nil {
		return nil
	}
	err := s.veto(cc)
	if err != nil {
		s.vetoing = index
	}
	return err
}

func newFakeSM() *fakeSM { return &fakeSM{changed: make(chan struct{})} }

func (s *fakeSM) AppliedIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Applied
}

func (s *fakeSM) Apply(ents []raftpb.Entry) error {
	s.mu.Lock()
	if s.inApply {
		s.violate(fmt.Errorf("concurrent Apply calls"))
	}
	s.inApply = true
	hook := s.beforeApply
	s.mu.Unlock()
	for _, e := range ents {
		if hook != nil {
			hook(e)
		}
		s.mu.Lock()
		if e.Index != s.state.Applied+1 {
			s.violate(fmt.Errorf("applied entry %d after %d", e.Index, s.state.Applied))
		}
		if isConfChange(e.Type) && len(ents) != 1 {
			s.violate(fmt.Errorf("conf change %d not alone in its batch", e.Index))
		}
		s.state.Applied = e.Index
		if e.Type == raftpb.EntryNormal && len(e.Data) > 0 {
			s.state.Payloads = append(s.state.Payloads, string(e.Data))
		}
		if isConfChange(e.Type) {
			s.state.ConfChanges++
			if s.vetoing == e.Index {
				s.state.Vetoed = append(s.state.Vetoed, e.Index)
			}
		}
		s.notifyLocked()
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.inApply = false
	s.mu.Unlock()
	return nil
}

func (s *fakeSM) violate(err error) {
	if s.violation == nil {
		s.violation = err
	}
}

func (s *fakeSM) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

type fakeImage struct{ data []byte }

func (i fakeImage) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(i.data)
	return int64(n), err
}
func (fakeImage) Release() {}

func (s *fakeSM) Snapshot() (Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fakeImage{data: s.encodeLocked()}, nil
}

func (s *fakeSM) encodeLocked() []byte {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(s.state); err != nil {
		panic(err) // encoding a plain struct into memory cannot fail
	}
	return buf.Bytes()
}

func (s *fakeSM) Restore(r io.Reader, meta raftpb.SnapshotMetadata) error {
	var st fakeState
	if err := gob.NewDecoder(r).Decode(&st); err != nil {
		return fmt.Errorf("decode fake state: %w", err)
	}
	// Read to EOF so the snapshot reader verifies its checksum.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Applied != meta.Index {
		s.violate(fmt.Errorf("image holds index %d, metadata says %d", st.Applied, meta.Index))
	}
	s.state = st
	s.restores++
	s.notifyLocked()
	return nil
}

// image returns an encoded copy of the current state (a state machine that
// persisted only this far).
func (s *fakeSM) image() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.encodeLocked()
}

func (s *fakeSM) payloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.state.Payloads...)
}

func (s *fakeSM) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.violation != nil {
		t.Fatalf("state machine contract violated: %v", s.violation)
	}
}

// waitUntil blocks until cond holds on the state machine (re-checked on
// every change) or the test deadline passes.
func (s *fakeSM) waitUntil(t *testing.T, what string, cond func(st *fakeState) bool) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond(&s.state)
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for the state machine: %s (applied %d, %d payloads)", what, s.AppliedIndex(), len(s.payloads()))
		}
	}
}

func (s *fakeSM) waitPayloads(t *testing.T, n int) {
	t.Helper()
	s.waitUntil(t, fmt.Sprintf("%d payloads", n), func(st *fakeState) bool { return len(st.Payloads) >= n })
}

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
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		changed := n.leaderChanged.next()
		if lead := n.lead.Load(); lead != raft.None {
			return lead
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("member %x: no leader within %v", n.cfg.ID, testTimeout)
		}
	}
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// proposeAll proposes every payload, retrying ones raft dropped (a
// proposal can be lost around a leader change; the caller retries).
func proposeAll(t *testing.T, n *Node, payloads []string) {
	t.Helper()
	ctx := testContext(t)
	for _, p := range payloads {
		if err := n.Propose(ctx, []byte(p)); err != nil {
			t.Errorf("propose %q: %v", p, err)
			return
		}
	}
}

func payloadRange(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%05d", prefix, i))
	}
	return out
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
