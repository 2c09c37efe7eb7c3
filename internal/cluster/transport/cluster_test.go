package transport

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// These tests run three real raftnode members wired by the transport over
// loopback HTTP/2, each link (from, to) through its own proxy so that a
// member can be cut off or stalled.

var _ raftnode.Transport = (*Transport)(nil)

// fakeSM is an ordered list of applied payloads with gob snapshots.
type fakeSM struct {
	mu       sync.Mutex
	state    smState
	restores int
	changed  chan struct{}
}

type smState struct {
	Applied  uint64
	Payloads []string
}

func newFakeSM() *fakeSM { return &fakeSM{changed: make(chan struct{})} }

func (s *fakeSM) AppliedIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Applied
}

func (s *fakeSM) Apply(ents []raftpb.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ents {
		s.state.Applied = e.Index
		if e.Type == raftpb.EntryNormal && len(e.Data) > 0 {
			s.state.Payloads = append(s.state.Payloads, string(e.Data))
		}
	}
	s.notifyLocked()
	return nil
}

func (s *fakeSM) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

type smImage struct{ data []byte }

func (i smImage) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(i.data)
	return int64(n), err
}
func (smImage) Release() {}

func (s *fakeSM) Snapshot() (raftnode.Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(s.state); err != nil {
		return nil, err
	}
	return smImage{data: buf.Bytes()}, nil
}

func (s *fakeSM) Restore(r io.Reader, meta raftpb.SnapshotMetadata) error {
	var st smState
	if err := gob.NewDecoder(r).Decode(&st); err != nil {
		return fmt.Errorf("decode state: %w", err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil { // lets the reader verify its checksum
		return err
	}
	if st.Applied != meta.Index {
		return fmt.Errorf("image holds index %d, metadata says %d", st.Applied, meta.Index)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = st
	s.restores++
	s.notifyLocked()
	return nil
}

func (s *fakeSM) payloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.state.Payloads...)
}

func (s *fakeSM) waitPayloads(t testing.TB, n int) {
	t.Helper()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		have, ch := len(s.state.Payloads), s.changed
		s.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %d payloads (have %d)", n, have)
		}
	}
}

// timedTransport records the longest Send: raft's loop calls it, so it
// must never block.
type timedTransport struct {
	*Transport
	longest atomic.Int64
}

func (tt *timedTransport) Send(msgs []raftpb.Message) {
	start := time.Now()
	tt.Transport.Send(msgs)
	d := int64(time.Since(start))
	for {
		cur := tt.longest.Load()
		if d <= cur || tt.longest.CompareAndSwap(cur, d) {
			return
		}
	}
}

type raftCluster struct {
	ids     []uint64
	nodes   map[uint64]*raftnode.Node
	sms     map[uint64]*fakeSM
	trs     map[uint64]*timedTransport
	regs    map[uint64]*prometheus.Registry
	proxies map[[2]uint64]*proxy // by (from, to)
}

func startRaftCluster(t *testing.T, tweakNode func(*raftnode.Config), tweakTransport func(*Config)) *raftCluster {
	t.Helper()
	c := &raftCluster{
		ids:     []uint64{1, 2, 3},
		nodes:   map[uint64]*raftnode.Node{},
		sms:     map[uint64]*fakeSM{},
		trs:     map[uint64]*timedTransport{},
		regs:    map[uint64]*prometheus.Registry{},
		proxies: map[[2]uint64]*proxy{},
	}
	urls := map[uint64]string{}
	for _, id := range c.ids {
		_, logger := newLogCapture(t, "transport "+idString(id))
		cfg := testConfig(id, 0xc1, logger)
		c.regs[id] = prometheus.NewRegistry()
		cfg.Metrics = c.regs[id]
		if tweakTransport != nil {
			tweakTransport(&cfg)
		}
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Stop)
		c.trs[id] = &timedTransport{Transport: tr}
		urls[id] = serve(t, tr)
	}
	for _, from := range c.ids {
		for _, to := range c.ids {
			if from != to {
				px := newProxy(t, urls[to])
				c.proxies[[2]uint64{from, to}] = px
				mustAddPeer(t, c.trs[from].Transport, to, px.url())
			}
		}
	}
	peers := []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	for _, id := range c.ids {
		_, logger := newLogCapture(t, "raft "+idString(id))
		cfg := raftnode.Config{
			ID:             id,
			ClusterID:      0xc1,
			Peers:          peers,
			DataDir:        t.TempDir(),
			TickInterval:   10 * time.Millisecond,
			ElectionTicks:  50, // stable leadership on a loaded machine
			HeartbeatTicks: 1,
			SnapshotCount:  1_000_000,
			Transport:      c.trs[id],
			Logger:         logger,
		}
		if tweakNode != nil {
			tweakNode(&cfg)
		}
		c.sms[id] = newFakeSM()
		n, err := raftnode.Start(cfg, c.sms[id])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Stop)
		c.nodes[id] = n
	}
	return c
}

// agreedLeader waits until every member names the same leader.
func (c *raftCluster) agreedLeader(t *testing.T) uint64 {
	t.Helper()
	var lead uint64
	waitFor(t, "members to agree on a leader", func() bool {
		lead = 0
		for _, n := range c.nodes {
			l := n.Status().Leader
			if l == raft.None || (lead != 0 && l != lead) {
				return false
			}
			lead = l
		}
		return true
	})
	return lead
}

func (c *raftCluster) others(id uint64) []uint64 {
	var out []uint64
	for _, o := range c.ids {
		if o != id {
			out = append(out, o)
		}
	}
	return out
}

// links calls fn on every proxy to or from id.
func (c *raftCluster) links(id uint64, fn func(*proxy)) {
	for key, px := range c.proxies {
		if key[0] == id || key[1] == id {
			fn(px)
		}
	}
}

func propose(t *testing.T, n *raftnode.Node, payloads ...string) {
	t.Helper()
	ctx := testContext(t)
	for _, p := range payloads {
		if err := n.Propose(ctx, []byte(p)); err != nil {
			t.Fatalf("propose %q: %v", p, err)
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

// counterSum adds up every series of a counter family.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// histogramCount adds up the sample counts of every series of a histogram.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func TestRaftClusterElectsAndReplicates(t *testing.T) {
	c := startRaftCluster(t, nil, nil)
	lead := c.agreedLeader(t)
	propose(t, c.nodes[lead], payloadRange("l", 0, 100)...)
	// A follower's proposals travel to the leader as MsgProp.
	follower := c.others(lead)[0]
	propose(t, c.nodes[follower], payloadRange("f", 0, 20)...)
	want := ""
	for _, id := range c.ids {
		c.sms[id].waitPayloads(t, 120)
		got := strings.Join(c.sms[id].payloads(), ",")
		if want == "" {
			want = got
		} else if got != want {
			t.Fatalf("member %d applied a different sequence", id)
		}
	}
	for _, id := range c.ids {
		if got := c.trs[id].ActivePeers(); len(got) != 2 {
			t.Fatalf("member %d has active peers %v", id, got)
		}
		for _, o := range c.others(id) {
			waitFor(t, "a probe round trip", func() bool {
				st, _ := c.trs[id].PeerStatus(o)
				return st.RoundTrip > 0
			})
		}
	}
	// Every payload went to both followers.
	payloadBytes := 0
	for _, p := range c.sms[lead].payloads() {
		payloadBytes += len(p)
	}
	reg := c.regs[lead]
	if sent := counterSum(t, reg, "etcd_network_peer_sent_bytes_total"); sent < float64(2*payloadBytes) {
		t.Fatalf("leader counted %v bytes sent, less than the %d payload bytes it replicated", sent, 2*payloadBytes)
	}
	if sent := counterSum(t, reg, "metastore_network_peer_sent_messages_total"); sent == 0 {
		t.Fatal("leader counted no sent messages")
	}
	if recv := counterSum(t, reg, "metastore_network_peer_received_messages_total"); recv == 0 {
		t.Fatal("leader counted no received messages")
	}
}

func TestIsolatedFollowerCatchesUpBySnapshot(t *testing.T) {
	c := startRaftCluster(t, func(cfg *raftnode.Config) {
		cfg.SnapshotCount = 30
		cfg.SnapshotCatchUpEntries = 5
	}, nil)
	lead := c.agreedLeader(t)
	lagging := c.others(lead)[0]
	c.links(lagging, func(px *proxy) { px.setCut(true) })

	propose(t, c.nodes[lead], payloadRange("p", 0, 200)...)
	c.sms[lead].waitPayloads(t, 200)
	// Wait until the leader's log no longer holds what the lagging member
	// needs: the log is compacted behind a snapshot (after its file is
	// saved), well past the lagging member's applied index (its log may
	// hold the new leader's entry, sent before the cut, unapplied).
	laggingApplied := c.sms[lagging].AppliedIndex()
	waitFor(t, "leader to compact past the lagging member", func() bool {
		return c.nodes[lead].FirstLogIndex() > laggingApplied+10
	})

	c.links(lagging, func(px *proxy) { px.setCut(false) })
	c.sms[lagging].waitPayloads(t, 200)
	sm := c.sms[lagging]
	sm.mu.Lock()
	restores := sm.restores
	sm.mu.Unlock()
	if restores == 0 {
		t.Fatal("lagging member caught up without a snapshot; the snapshot path was not exercised")
	}
	if got, want := strings.Join(sm.payloads(), ","), strings.Join(c.sms[lead].payloads(), ","); got != want {
		t.Fatal("lagging member's state differs from the leader's")
	}
	// Both ends record the transfer once it is acknowledged, which can be
	// after the follower already applied it.
	waitFor(t, "snapshot durations recorded", func() bool {
		return histogramCount(t, c.regs[lagging], "etcd_network_snapshot_receive_total_duration_seconds") > 0 &&
			histogramCount(t, c.regs[lead], "etcd_network_snapshot_send_total_duration_seconds") > 0
	})
	refs, err := c.nodes[lagging].Snapshots().List()
	if err != nil || len(refs) == 0 {
		t.Fatalf("lagging member has no snapshot file: %v %v", refs, err)
	}
	if _, err := c.nodes[lagging].Snapshots().Load(raftsnap.Ref{Term: refs[len(refs)-1].Term, Index: refs[len(refs)-1].Index}); err != nil {
		t.Fatalf("received snapshot file invalid: %v", err)
	}
	propose(t, c.nodes[lead], "after-catch-up")
	c.sms[lagging].waitPayloads(t, 201)
}

// TestStalledFollowerDoesNotBlockTheMajority stalls one follower (its
// proxies stop reading, its connections stay open) and keeps proposing
// until the leader's queue for it overflows: commits must go on through
// the other follower, and raft's calls to Send must stay short.
func TestStalledFollowerDoesNotBlockTheMajority(t *testing.T) {
	c := startRaftCluster(t, nil, func(cfg *Config) {
		cfg.QueueSize = 64
		cfg.ConnTimeout = time.Hour // nothing tears the stalled connection down
	})
	lead := c.agreedLeader(t)
	others := c.others(lead)
	stalled, healthy := others[0], others[1]
	propose(t, c.nodes[lead], "before-stall")
	for _, id := range c.ids {
		c.sms[id].waitPayloads(t, 1)
	}
	c.links(stalled, func(px *proxy) { px.setPaused(true) })

	payload := strings.Repeat("x", 8<<10)
	proposed := 1
	for batch := 0; ; batch++ {
		if st, _ := c.trs[lead].PeerStatus(stalled); st.Dropped > 0 {
			break
		}
		if batch == 1000 {
			t.Fatal("the leader's queue for the stalled follower never overflowed")
		}
		var ps []string
		for i := range 50 {
			ps = append(ps, fmt.Sprintf("%d-%d-%s", batch, i, payload))
		}
		propose(t, c.nodes[lead], ps...)
		proposed += len(ps)
		// Commits go on through the healthy follower.
		c.sms[healthy].waitPayloads(t, proposed)
	}
	propose(t, c.nodes[lead], "after-overflow")
	proposed++
	c.sms[lead].waitPayloads(t, proposed)
	c.sms[healthy].waitPayloads(t, proposed)
	longest := time.Duration(c.trs[lead].longest.Load())
	t.Logf("%d proposals committed while a follower stalled; longest Send %v", proposed, longest)
	if longest > 2*time.Second {
		t.Fatalf("Send took %v: it blocked on the stalled follower", longest)
	}

	c.links(stalled, func(px *proxy) { px.setPaused(false) })
	c.sms[stalled].waitPayloads(t, proposed)
}
