package statemachine

import (
	"testing"

	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
)

// FuzzCheckConfChange feeds conf-change entries of any bytes (a corrupt or
// hostile log) through decoding and the member list's checks: they must
// refuse or accept, never panic, and an accepted add must carry the
// record of the node it names.
func FuzzCheckConfChange(f *testing.F) {
	m := &membershippb.Member{ID: 7, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{"http://a:1"}}}
	ctx, err := m.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	for _, cc := range []raftpb.ConfChange{
		{Type: raftpb.ConfChangeAddNode, NodeID: 7, Context: ctx},
		{Type: raftpb.ConfChangeAddLearnerNode, NodeID: 8, Context: ctx},
		{Type: raftpb.ConfChangeRemoveNode, NodeID: 1},
		{Type: raftpb.ConfChangeUpdateNode, NodeID: 1, Context: ctx},
		{Type: raftpb.ConfChangeAddNode, NodeID: 9},
	} {
		data, err := cc.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(false, data)
		asV2 := cc.AsV2()
		v2, err := asV2.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(true, v2)
	}
	f.Fuzz(func(t *testing.T, v2 bool, data []byte) {
		cluster := membership.New(1, 0xc1)
		cluster.Add(discardAux{}, &membershippb.Member{ID: 1, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{"http://b:1"}}})
		sm := New(Deps{Cluster: cluster})
		e := &raftpb.Entry{Type: raftpb.EntryConfChange, Index: 5, Data: data}
		if v2 {
			e.Type = raftpb.EntryConfChangeV2
		}
		cc, _, err := decodeConfChange(e)
		if err != nil {
			return
		}
		changes, err := sm.checkConfChange(cc)
		if err != nil {
			return
		}
		for _, mc := range changes {
			if mc.member != nil && mc.cc.Type != raftpb.ConfChangeRemoveNode && mc.cc.Type != raftpb.ConfChangeUpdateNode && mc.member.ID != mc.cc.NodeID {
				t.Fatalf("accepted %v carrying member %x", mc.cc, mc.member.ID)
			}
		}
	})
}

// discardAux is an AuxWriter that keeps nothing.
type discardAux struct{}

func (discardAux) PutAux(byte, []byte, []byte) {}
func (discardAux) DeleteAux(byte, []byte)      {}
