package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/test/raftkit"
)

// waitFor polls a condition on internal state that has no event of its
// own, bounded by the test deadline.
// campaign makes a member that never ticks stand for election, once raft
// has applied the bootstrap configuration (before that it refuses).
func campaign(t *testing.T, n *Node) {
	t.Helper()
	raftkit.WaitFor(t, "raft to apply the bootstrap configuration", func() bool {
		return raftApplied(n) >= 1
	})
	var err error
	n.raft.with(func(rn *raft.RawNode) { err = rn.Campaign() })
	if err != nil {
		t.Fatal(err)
	}
}

func TestLinearizableReadWaitsForApply(t *testing.T) {
	sm := raftkit.New()
	entered := make(chan uint64, 1)
	release := make(chan struct{})
	sm.SetBeforeApply(func(e raftpb.Entry) {
		if string(e.Data) == "slow" {
			entered <- e.Index
			<-release
		}
	})
	n := mustStart(t, testConfig(t, t.TempDir()), sm)
	waitLeader(t, n)
	ctx := raftkit.Context(t)
	if err := n.Propose(ctx, []byte("slow")); err != nil {
		t.Fatal(err)
	}
	var slowIndex uint64
	select {
	case slowIndex = <-entered:
	case <-ctx.Done():
		t.Fatal("apply of the slow entry never started")
	}

	type result struct {
		err     error
		applied uint64
	}
	done := make(chan result, 1)
	go func() {
		err := n.LinearizableRead(ctx)
		done <- result{err, sm.AppliedIndex()}
	}()
	// The round is confirmed (commit index >= slowIndex) and now waits for
	// the apply loop, which is stuck in the slow entry.
	raftkit.WaitFor(t, "read round waiting for apply", func() bool { return n.appliedWaits.pending() == 1 })
	select {
	case r := <-done:
		t.Fatalf("LinearizableRead returned (%v) while entry %d was still being applied", r.err, slowIndex)
	default:
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.applied < slowIndex {
		t.Fatalf("read returned at applied index %d, below the committed %d", r.applied, slowIndex)
	}
}

func TestLinearizableReadBatchesConcurrentCalls(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	// No ticks: nobody campaigns until the test says so.
	cfg.TickInterval = time.Hour
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	ctx := raftkit.Context(t)

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	read := func() {
		defer wg.Done()
		errs <- n.LinearizableRead(ctx)
	}
	wg.Add(1)
	go read()
	// The first round is in flight, unanswerable without a leader.
	raftkit.WaitFor(t, "first round to start", func() bool { return n.readRounds.Load() == 1 })
	const later = 50
	for i := 0; i < later; i++ {
		wg.Add(1)
		go read()
	}
	raftkit.WaitFor(t, "later reads to join the next round", func() bool {
		n.readMu.Lock()
		defer n.readMu.Unlock()
		return n.nextRead.waiters == later
	})
	campaign(t, n)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if rounds := n.readRounds.Load(); rounds != 2 {
		t.Fatalf("%d ReadIndex rounds for 1+%d reads, want 2 (one per batch)", rounds, later)
	}
}

func TestLinearizableReadWithoutLeaderHonoursContext(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.TickInterval = time.Hour
	n := mustStart(t, cfg, raftkit.New())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := n.LinearizableRead(ctx)
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read without a leader: %v, want ErrNoLeader and DeadlineExceeded", err)
	}
	// The abandoned round does not block reads once a leader exists.
	campaign(t, n)
	if err := n.LinearizableRead(raftkit.Context(t)); err != nil {
		t.Fatal(err)
	}
}

// TestLinearizableReadRoundTimesOut: without a leader a round ends with
// ErrReadTimeout once ReadTimeout has passed since it started, for every
// caller in it (none has a deadline of its own), and not before; reads
// go on once a leader exists.
func TestLinearizableReadRoundTimesOut(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.TickInterval = time.Hour
	cfg.ReadTimeout = 100 * time.Millisecond
	n := mustStart(t, cfg, raftkit.New())
	start := time.Now()
	errs := make(chan error, 3)
	for range cap(errs) {
		go func() { errs <- n.LinearizableRead(raftkit.Context(t)) }()
	}
	for range cap(errs) {
		if err := <-errs; !errors.Is(err, ErrReadTimeout) {
			t.Fatalf("read without a leader: %v, want ErrReadTimeout", err)
		}
	}
	if took := time.Since(start); took < cfg.ReadTimeout {
		t.Fatalf("the round ended after %v, before its timeout %v", took, cfg.ReadTimeout)
	}
	campaign(t, n)
	if err := n.LinearizableRead(raftkit.Context(t)); err != nil {
		t.Fatal(err)
	}
}

func TestLinearizableReadSeesPriorWrites(t *testing.T) {
	sm := raftkit.New()
	n := mustStart(t, testConfig(t, t.TempDir()), sm)
	waitLeader(t, n)
	ctx := raftkit.Context(t)
	for i := 0; i < 20; i++ {
		if err := n.Propose(ctx, []byte{'w', byte(i)}); err != nil {
			t.Fatal(err)
		}
		// Whatever was committed before the read started must be applied
		// when it returns.
		committedBefore := n.Status().CommitIndex
		if err := n.LinearizableRead(ctx); err != nil {
			t.Fatal(err)
		}
		if got := sm.AppliedIndex(); got < committedBefore {
			t.Fatalf("read returned at applied %d although %d was committed before it started", got, committedBefore)
		}
	}
}

// heartbeatGate holds back every MsgHeartbeatResp while closed, so that
// ReadIndex requests pile up at the leader unconfirmed; open sends them
// on in order.
type heartbeatGate struct {
	mu     sync.Mutex
	closed bool
	held   []heldMessage
}

type heldMessage struct {
	via Transport
	m   raftpb.Message
}

func (g *heartbeatGate) wrap(inner Transport) Transport {
	return &gatedTransport{gate: g, inner: inner}
}

func (g *heartbeatGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// heldFor counts held answers to heartbeats that carried member's latest
// ReadIndex request. Answers to an earlier request of member's (a warm-up
// read, answered by a quorum before the slower follower's answer came in
// and was held) do not count.
func (g *heartbeatGate) heldFor(member uint64) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	count, latest := 0, uint64(0)
	for _, h := range g.held {
		from, seq, ok := decodeReadRequestCtx(h.m.Context)
		switch {
		case !ok || from != member || seq < latest:
		case seq > latest:
			count, latest = 1, seq
		default:
			count++
		}
	}
	return count
}

func (g *heartbeatGate) open() {
	g.mu.Lock()
	held := g.held
	g.held, g.closed = nil, false
	g.mu.Unlock()
	for _, h := range held {
		h.via.Send([]raftpb.Message{h.m})
	}
}

type gatedTransport struct {
	gate  *heartbeatGate
	inner Transport
}

func (t *gatedTransport) Send(msgs []raftpb.Message) {
	g := t.gate
	g.mu.Lock()
	pass := msgs[:0:0]
	for _, m := range msgs {
		if g.closed && m.Type == raftpb.MsgHeartbeatResp {
			g.held = append(g.held, heldMessage{via: t.inner, m: m})
			continue
		}
		pass = append(pass, m)
	}
	g.mu.Unlock()
	if len(pass) > 0 {
		t.inner.Send(pass)
	}
}

func (t *gatedTransport) Attach(l Local) { t.inner.Attach(l) }

// Every member's ReadIndex requests meet in the leader's raft, which keys
// pending requests by their context and silently drops a second request
// with a context already pending. Requests that are pending together from
// different members must therefore all be answered, each by its first
// request: ticks are off, so a request raft dropped would never be retried
// and its read would hang.
func TestConcurrentReadsOnEveryMemberAreAnsweredWithoutRetry(t *testing.T) {
	gate := &heartbeatGate{}
	c := startCluster(t, func(cfg *Config) {
		cfg.TickInterval = time.Hour // no heartbeats, no elections, no retries
		cfg.Transport = gate.wrap(cfg.Transport)
	})
	campaign(t, c.nodes[1])
	if lead := c.agreedLeader(t); lead != 1 {
		t.Fatalf("leader %x, want 1", lead)
	}
	ctx := raftkit.Context(t)
	// One read per member first: the leader has then committed in its
	// term (it postpones ReadIndex until then) and every member has a
	// round behind it, so the next rounds are alike on all members.
	for _, id := range []uint64{1, 2, 3} {
		if err := c.nodes[id].LinearizableRead(ctx); err != nil {
			t.Fatalf("member %d: warm-up read: %v", id, err)
		}
	}

	gate.close()
	errs := make(chan error, 3)
	for _, id := range []uint64{1, 2, 3} {
		go func() { errs <- c.nodes[id].LinearizableRead(ctx) }()
		// The leader broadcasts a heartbeat carrying each request's
		// context as it receives the request; both followers' answers
		// are held, so the request stays pending at the leader. (Answers
		// to the warm-up reads' heartbeats may be held too.)
		raftkit.WaitFor(t, fmt.Sprintf("member %d's request to be pending at the leader", id),
			func() bool { return gate.heldFor(id) == 2 })
	}
	gate.open()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []uint64{1, 2, 3} {
		if rounds := c.nodes[id].readRounds.Load(); rounds != 2 {
			t.Errorf("member %d: %d ReadIndex rounds, want 2", id, rounds)
		}
	}
}

// FuzzDecodeReadRequestCtx feeds arbitrary bytes, as a leader could echo
// them back, to the context decoder: it must not panic, must accept
// exactly the contexts encodeReadRequestCtx makes, and round-trip them.
func FuzzDecodeReadRequestCtx(f *testing.F) {
	valid := encodeReadRequestCtx(0x2f1ccdbcf2f78c80, 7)
	f.Add(valid[:])
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 7}) // the old 8-byte form
	f.Add(append(valid[:], 0))
	f.Fuzz(func(t *testing.T, rctx []byte) {
		member, seq, ok := decodeReadRequestCtx(rctx)
		if ok != (len(rctx) == readRequestCtxLen) {
			t.Fatalf("decode %x: ok=%v for length %d", rctx, ok, len(rctx))
		}
		if !ok {
			return
		}
		if again := encodeReadRequestCtx(member, seq); string(again[:]) != string(rctx) {
			t.Fatalf("decode %x = (%x, %d), which encodes to %x", rctx, member, seq, again)
		}
	})
}

func TestReadStateAnswersOnlyThisMembersLaterRequests(t *testing.T) {
	n := &Node{cfg: Config{ID: 2}}
	state := func(member, seq uint64) raft.ReadState {
		rctx := encodeReadRequestCtx(member, seq)
		return raft.ReadState{Index: 9, RequestCtx: rctx[:]}
	}
	for _, c := range []struct {
		name   string
		rs     raft.ReadState
		answer bool
	}{
		{"first request of the round", state(2, 100), true},
		{"a retry of the round", state(2, 101), true},
		{"an earlier round", state(2, 99), false},
		{"another member's request", state(3, 100), false},
		{"a context of another form", raft.ReadState{Index: 9, RequestCtx: []byte{0, 0, 0, 0, 0, 0, 0, 100}}, false},
	} {
		if got := n.answersRound(c.rs, 100); got != c.answer {
			t.Errorf("%s: answersRound = %v, want %v", c.name, got, c.answer)
		}
	}
}
