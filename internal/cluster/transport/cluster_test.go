package transport

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/raftnode"

	"github.com/metastore-io/metastore/test/raftkit"
)

// These tests run three real raftnode members wired by the transport over
// loopback HTTP/1.1, each link (from, to) through its own proxy so that a
// member can be cut off or stalled: the connections from dials to to's
// URL (its readers of to's streams, its snapshots and calls).

var _ raftnode.Transport = (*Transport)(nil)

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
	sms     map[uint64]*raftkit.StateMachine
	trs     map[uint64]*timedTransport
	regs    map[uint64]*prometheus.Registry
	proxies map[[2]uint64]*proxy // by (from, to)
}

func startRaftCluster(t *testing.T, tweakNode func(*raftnode.Config), tweakTransport func(*Config)) *raftCluster {
	t.Helper()
	c := &raftCluster{
		ids:     []uint64{1, 2, 3},
		nodes:   map[uint64]*raftnode.Node{},
		sms:     map[uint64]*raftkit.StateMachine{},
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
		sm := raftkit.New()
		c.sms[id] = sm
		n, err := raftnode.Start(cfg, sm)
		if err != nil {
			t.Fatal(err)
		}
		// Cleanups run last first: the member stops, then its state
		// machine is checked.
		t.Cleanup(func() { sm.Check(t) })
		t.Cleanup(n.Stop)
		c.nodes[id] = n
	}
	return c
}

// agreedLeader waits until every member names the same leader.
func (c *raftCluster) agreedLeader(t *testing.T) uint64 {
	t.Helper()
	return raftkit.AgreedLeader(t, c.nodes, func(n *raftnode.Node) uint64 { return n.Status().Leader })
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
	ctx := raftkit.Context(t)
	for _, p := range payloads {
		if err := n.Propose(ctx, []byte(p)); err != nil {
			t.Fatalf("propose %q: %v", p, err)
		}
	}
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
	propose(t, c.nodes[lead], raftkit.PayloadRange("l", 0, 100)...)
	// A follower's proposals travel to the leader as MsgProp.
	follower := c.others(lead)[0]
	propose(t, c.nodes[follower], raftkit.PayloadRange("f", 0, 20)...)
	want := ""
	for _, id := range c.ids {
		c.sms[id].WaitPayloads(t, 120)
		got := strings.Join(c.sms[id].Payloads(), ",")
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
			raftkit.WaitFor(t, "a probe round trip", func() bool {
				st, _ := c.trs[id].PeerStatus(o)
				return st.RoundTrip > 0
			})
		}
	}
	// Every payload went to both followers.
	payloadBytes := 0
	for _, p := range c.sms[lead].Payloads() {
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

	propose(t, c.nodes[lead], raftkit.PayloadRange("p", 0, 200)...)
	c.sms[lead].WaitPayloads(t, 200)
	// Wait until the leader's log no longer holds what the lagging member
	// needs: the log is compacted behind a snapshot (after its file is
	// saved), well past the lagging member's applied index (its log may
	// hold the new leader's entry, sent before the cut, unapplied).
	laggingApplied := c.sms[lagging].AppliedIndex()
	raftkit.WaitFor(t, "leader to compact past the lagging member", func() bool {
		return c.nodes[lead].FirstLogIndex() > laggingApplied+10
	})

	c.links(lagging, func(px *proxy) { px.setCut(false) })
	c.sms[lagging].WaitPayloads(t, 200)
	sm := c.sms[lagging]
	restores := sm.Restores()
	if restores == 0 {
		t.Fatal("lagging member caught up without a snapshot; the snapshot path was not exercised")
	}
	if got, want := strings.Join(sm.Payloads(), ","), strings.Join(c.sms[lead].Payloads(), ","); got != want {
		t.Fatal("lagging member's state differs from the leader's")
	}
	// Both ends record the transfer once it is acknowledged, which can be
	// after the follower already applied it.
	raftkit.WaitFor(t, "snapshot durations recorded", func() bool {
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
	c.sms[lagging].WaitPayloads(t, 201)
}

// TestStalledFollowerDoesNotBlockTheMajority stalls one follower (its
// proxies stop reading, its connections stay open) and keeps proposing
// until the leader cannot have delivered to it (its queue overflowed, or
// far more was committed than every buffer on the way holds, so raft's
// flow control has stopped sending): commits must go on through the other
// follower, and raft's calls to Send must stay short.
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
		c.sms[id].WaitPayloads(t, 1)
	}
	c.links(stalled, func(px *proxy) { px.setPaused(true) })

	const beyondBuffers = 48 << 20 // loopback socket buffers and the proxy's hold a few MiB
	payload := strings.Repeat("x", 8<<10)
	proposed, committedBytes := 1, 0
	for batch := 0; committedBytes < beyondBuffers; batch++ {
		if st, _ := c.trs[lead].PeerStatus(stalled); st.Dropped > 0 {
			break
		}
		var ps []string
		for i := range 50 {
			ps = append(ps, fmt.Sprintf("%d-%d-%s", batch, i, payload))
		}
		propose(t, c.nodes[lead], ps...)
		proposed += len(ps)
		committedBytes += len(ps) * len(payload)
		// Commits go on through the healthy follower.
		c.sms[healthy].WaitPayloads(t, proposed)
	}
	if got := c.sms[stalled].Payloads(); len(got) >= proposed {
		t.Fatalf("the stalled follower applied %d of %d payloads: it was not stalled", len(got), proposed)
	}
	propose(t, c.nodes[lead], "after-overflow")
	proposed++
	c.sms[lead].WaitPayloads(t, proposed)
	c.sms[healthy].WaitPayloads(t, proposed)
	longest := time.Duration(c.trs[lead].longest.Load())
	t.Logf("%d proposals committed while a follower stalled; longest Send %v", proposed, longest)
	if longest > 2*time.Second {
		t.Fatalf("Send took %v: it blocked on the stalled follower", longest)
	}

	c.links(stalled, func(px *proxy) { px.setPaused(false) })
	c.sms[stalled].WaitPayloads(t, proposed)
}
