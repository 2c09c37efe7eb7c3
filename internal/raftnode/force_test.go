package raftnode

import (
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// The configuration --force-new-cluster shrinks is the snapshot's, moved
// on by the conf changes in the log (v1 and v2 entries).
func TestEffectiveMembers(t *testing.T) {
	cc := func(typ raftpb.ConfChangeType, id uint64) raftpb.Entry {
		data, err := (&raftpb.ConfChange{Type: typ, NodeID: id}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return raftpb.Entry{Type: raftpb.EntryConfChange, Data: data}
	}
	v2, err := (&raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 9}}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ents := []raftpb.Entry{
		cc(raftpb.ConfChangeRemoveNode, 2),
		{Type: raftpb.EntryNormal, Data: []byte("x")},
		cc(raftpb.ConfChangeAddNode, 4),
		cc(raftpb.ConfChangeRemoveNode, 0), // a vetoed change's no-op
		{Type: raftpb.EntryConfChangeV2, Data: v2},
	}
	got, err := effectiveMembers(raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{5}}, ents)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 3, 4, 5, 9}; !slices.Equal(got, want) {
		t.Fatalf("effective members %v, want %v", got, want)
	}
}
