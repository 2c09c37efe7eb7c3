package raftnode

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"

	"github.com/metastore-io/metastore/test/raftkit"
)

type testCluster struct {
	net   *memNetwork
	nodes map[uint64]*Node
	sms   map[uint64]*raftkit.StateMachine
	cfgs  map[uint64]Config
}

// startCluster starts three members wired by the in-memory transport.
func startCluster(t *testing.T, tweak func(*Config)) *testCluster {
	t.Helper()
	ids := []uint64{1, 2, 3}
	c := &testCluster{
		net:   newMemNetwork(t, ids...),
		nodes: map[uint64]*Node{},
		sms:   map[uint64]*raftkit.StateMachine{},
		cfgs:  map[uint64]Config{},
	}
	peers := []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	for _, id := range ids {
		cfg := testConfig(t, t.TempDir())
		cfg.ID = id
		cfg.Peers = peers
		cfg.Transport = c.net.transport(id)
		cfg.Logger = cfg.Logger.With("test_member", id)
		// A long election timeout (500ms) keeps leadership stable on a
		// loaded machine under -race: a leader change can drop proposals,
		// which these tests do not retry.
		cfg.ElectionTicks = 50
		if tweak != nil {
			tweak(&cfg)
		}
		c.cfgs[id] = cfg
		c.sms[id] = raftkit.New()
		c.nodes[id] = mustStart(t, cfg, c.sms[id])
		c.net.attach(c.nodes[id])
	}
	return c
}

// agreedLeader waits until every member names the same leader.
func (c *testCluster) agreedLeader(t *testing.T) uint64 {
	t.Helper()
	return raftkit.AgreedLeader(t, c.nodes, func(n *Node) uint64 { return n.Status().Leader })
}

func (c *testCluster) follower(lead uint64) uint64 {
	for id := range c.nodes {
		if id != lead {
			return id
		}
	}
	return 0
}

func TestThreeMembersElectOneLeaderAndReplicate(t *testing.T) {
	c := startCluster(t, nil)
	lead := c.agreedLeader(t)
	leaders := 0
	for _, n := range c.nodes {
		if n.Status().IsLeader {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d members think they lead", leaders)
	}

	proposeAll(t, c.nodes[lead], raftkit.PayloadRange("l", 0, 100))
	// A follower forwards proposals to the leader.
	follower := c.follower(lead)
	proposeAll(t, c.nodes[follower], raftkit.PayloadRange("f", 0, 20))
	for _, sm := range c.sms {
		sm.WaitPayloads(t, 120)
		sm.Check(t)
	}
	want := strings.Join(c.sms[lead].Payloads(), ",")
	for id, sm := range c.sms {
		if got := strings.Join(sm.Payloads(), ","); got != want {
			t.Fatalf("member %d applied a different sequence than the leader:\n%s\nvs\n%s", id, got, want)
		}
	}
	for id, n := range c.nodes {
		if st := n.Status(); !slices.Equal(st.Voters, []uint64{1, 2, 3}) || st.IsLearner {
			t.Fatalf("member %d configuration %+v", id, st)
		}
	}

	// A linearizable read on a follower goes through the leader and waits
	// for the follower's own apply.
	committed := c.nodes[lead].Status().CommitIndex
	if err := c.nodes[follower].LinearizableRead(raftkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	if got := c.sms[follower].AppliedIndex(); got < committed {
		t.Fatalf("follower read returned at applied %d, leader had committed %d before", got, committed)
	}

	if err := c.nodes[lead].TransferLeadership(raftkit.Context(t), follower); err != nil {
		t.Fatal(err)
	}
	if got := c.agreedLeader(t); got != follower {
		t.Fatalf("leader after transfer is %d, want %d", got, follower)
	}
	proposeAll(t, c.nodes[follower], []string{"after-transfer"})
	for _, sm := range c.sms {
		sm.WaitPayloads(t, 121)
	}
}

func TestLaggingFollowerCatchesUpFromSnapshot(t *testing.T) {
	c := startCluster(t, func(cfg *Config) {
		cfg.SnapshotCount = 30
		cfg.SnapshotCatchUpEntries = 5
	})
	lead := c.agreedLeader(t)
	lagging := c.follower(lead)
	c.net.isolate(lagging, true)

	proposeAll(t, c.nodes[lead], raftkit.PayloadRange("p", 0, 200))
	c.sms[lead].WaitPayloads(t, 200)
	// The leader's log no longer holds what the lagging member needs.
	laggingNext := c.sms[lagging].AppliedIndex() + 1
	raftkit.WaitFor(t, "leader to compact past the lagging member", func() bool {
		first, err := c.nodes[lead].storage.FirstIndex()
		return err == nil && first > laggingNext
	})

	c.net.isolate(lagging, false)
	sm := c.sms[lagging]
	sm.WaitPayloads(t, 200)
	sm.Check(t)
	restores := sm.Restores()
	if restores == 0 {
		t.Fatal("lagging member caught up without a snapshot; the test did not exercise the install path")
	}
	want := c.sms[lead].Payloads()
	if got := sm.Payloads(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatal("lagging member's state differs from the leader's")
	}

	// The member restarts from the installed snapshot and its WAL.
	c.nodes[lagging].Stop()
	sm2 := raftkit.New()
	n2 := mustStart(t, c.cfgs[lagging], sm2)
	c.net.attach(n2)
	c.nodes[lagging] = n2
	proposeAll(t, c.nodes[lead], []string{"after-restart"})
	sm2.WaitPayloads(t, 201)
	sm2.Check(t)
	if got := sm2.Payloads(); got[200] != "after-restart" || strings.Join(got[:200], ",") != strings.Join(want[:200], ",") {
		t.Fatalf("restarted member holds %v...", got[:min(5, len(got))])
	}
}

func TestJoinNeedsTransport(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Join = true
	cfg.Peers = nil
	if _, err := Start(cfg, raftkit.New()); err == nil {
		t.Fatal("Join without a transport accepted")
	}
	cfg = testConfig(t, t.TempDir())
	cfg.Peers = []raft.Peer{{ID: 1}, {ID: 2}}
	if _, err := Start(cfg, raftkit.New()); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("peer %x", 2)) {
		t.Fatalf("peers without a transport: %v", err)
	}
}
