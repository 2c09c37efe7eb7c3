package raftnode

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/test/raftkit"
)

// refuseNode vetoes every conf change naming node id.
func refuseNode(id uint64) func(cc raftpb.ConfChangeI) error {
	return func(cc raftpb.ConfChangeI) error {
		for _, c := range cc.AsV2().Changes {
			if c.NodeID == id {
				return fmt.Errorf("node %d refused", id)
			}
		}
		return nil
	}
}

// proposeConfChangeApplied proposes cc and waits until sm applied it: raft
// ignores a conf change proposed while an earlier one is unapplied.
func proposeConfChangeApplied(t *testing.T, n *Node, sm *raftkit.StateMachine, cc raftpb.ConfChange) {
	t.Helper()
	before := sm.State().ConfChanges
	if err := n.ProposeConfChange(raftkit.Context(t), cc); err != nil {
		t.Fatal(err)
	}
	sm.WaitUntil(t, fmt.Sprintf("conf change %v applied", cc), func(st *raftkit.State) bool {
		return st.ConfChanges > before
	})
	// raft drops a conf change proposed while it still counts an earlier
	// one as unapplied ("possible unapplied conf change"): its applied
	// index moves when the raft loop advances, which may be after the
	// apply loop is done. Wait for it, so the caller's next conf change
	// is not dropped.
	applied := sm.AppliedIndex()
	raftkit.WaitFor(t, fmt.Sprintf("raft to count entry %d applied", applied), func() bool {
		return raftApplied(n) >= applied
	})
}

// waitConfiguration waits until n's published configuration is voters
// and learners.
func waitConfiguration(t *testing.T, n *Node, voters, learners []uint64) {
	t.Helper()
	raftkit.WaitFor(t, fmt.Sprintf("configuration voters %v learners %v", voters, learners), func() bool {
		st := n.Status()
		slices.Sort(st.Voters)
		slices.Sort(st.Learners)
		return slices.Equal(st.Voters, voters) && slices.Equal(st.Learners, learners)
	})
}

// A vetoed conf change reaches the state machine but not raft's
// configuration, and stays vetoed when raft replays it after a restart,
// whether the state machine holds the entry (it answers from its record)
// or applies it again (it decides again from the same state).
func TestVetoedConfChangeLeavesRaftConfigurationUnchanged(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	sm := raftkit.New()
	sm.SetVeto(refuseNode(4))
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	proposeAll(t, n, []string{"before"})

	proposeConfChangeApplied(t, n, sm, raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 4})
	vetoed := sm.State().Vetoed
	if len(vetoed) != 1 {
		t.Fatalf("vetoed conf changes %v, want the add of node 4", vetoed)
	}
	waitConfiguration(t, n, []uint64{1}, nil)
	proposeConfChangeApplied(t, n, sm, raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 5})
	waitConfiguration(t, n, []uint64{1}, []uint64{5})
	proposeAll(t, n, []string{"after"})
	sm.WaitPayloads(t, 2)
	sm.Check(t)
	n.Stop()

	// The state machine holds every entry: raft replays them all (no
	// snapshot yet), and each conf change is answered from the record.
	n = mustStart(t, cfg, sm)
	waitLeader(t, n)
	waitConfiguration(t, n, []uint64{1}, []uint64{5})
	held := sm.HeldValidations()
	if held < 3 { // bootstrap, add 4, add 5
		t.Fatalf("%d conf changes were validated as held on restart, want 3", held)
	}
	sm.Check(t)
	n.Stop()

	// An empty state machine applies everything again and decides alike.
	fresh := raftkit.New()
	fresh.SetVeto(refuseNode(4))
	n = mustStart(t, cfg, fresh)
	waitLeader(t, n)
	fresh.WaitPayloads(t, 2)
	waitConfiguration(t, n, []uint64{1}, []uint64{5})
	again := fresh.State().Vetoed
	if !slices.Equal(again, vetoed) {
		t.Fatalf("replay vetoed %v, first run %v", again, vetoed)
	}
	fresh.Check(t)
}

// On replay a held conf change follows the state machine's answer, which
// comes from its record: one accepted then is applied to raft again even
// though the policy would now refuse it.
func TestHeldConfChangeFollowsRecordNotPolicy(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	proposeConfChangeApplied(t, n, sm, raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 4})
	waitConfiguration(t, n, []uint64{1}, []uint64{4})
	n.Stop()

	sm.SetVeto(func(raftpb.ConfChangeI) error { return errors.New("policy changed") })
	n = mustStart(t, cfg, sm)
	waitLeader(t, n)
	waitConfiguration(t, n, []uint64{1}, []uint64{4})
	sm.Check(t)
}
