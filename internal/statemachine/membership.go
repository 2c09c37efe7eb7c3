package statemachine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// vetoBucket is the store's auxiliary bucket
// (kvstore.BucketConfChangeVeto) recording the conf changes the member
// list refused: key the entry's index (8 bytes, big endian),
// value the reason, for operators. It is written in the batch of the
// entry, so it is exactly as durable as the entry's effects, and it is the
// same on every member. A record takes a few dozen bytes and is written
// only when conflicting membership changes race, so none is ever pruned.
// For example, a refused add at index 1234:
//
//	'v' 00 00 00 00 00 00 04 d2 -> "membership: peerURL exists"
const vetoBucket = kvstore.BucketConfChangeVeto

// memberChange is one change of a conf-change entry, decoded and checked
// against the member list.
type memberChange struct {
	cc raftpb.ConfChange
	// member is the record cc.Context carries: the member to add, the
	// learner to promote, or the new peer URLs; nil for a removal, and
	// for a bootstrap entry without a record, which changes nothing.
	member *membershippb.Member
	// promote marks an AddNode naming an existing learner (see
	// the member's promoteAsLeader).
	promote bool
}

// ValidateConfChange decides whether the committed conf change at index
// takes effect (raftnode.ConfChangeValidator): raft's configuration follows
// only the changes the member list accepts, so the two never diverge. The
// change is checked as etcd's ValidateConfigurationChange does, against the
// member list as the entries before index left it, and against replicated
// state only (not this member's --max-learners), so every member decides
// alike. For an entry the store already holds (raft replays it after a
// restart) the decision is the one recorded in vetoBucket when it was
// applied: the member list has moved past it and would decide otherwise
// (it would refuse an add it has since made).
func (sm *StateMachine) ValidateConfChange(index uint64, cc raftpb.ConfChangeI) error {
	if index <= sm.AppliedIndex() {
		return sm.recordedVeto(index)
	}
	_, err := sm.checkConfChange(cc)
	return err
}

// applyConfChange records the conf change entry e in the member list, or,
// if the member list refuses it, the refusal in vetoBucket; then it answers
// the proposer with the resulting member list or the refusal. raftnode
// asked ValidateConfChange just before, against the same member list, so
// the checks here come to the same answer, and raft's configuration
// changed only if this one does.
func (sm *StateMachine) applyConfChange(e *raftpb.Entry) {
	cc, proposal, err := decodeConfChange(e)
	if err != nil {
		// raftnode decoded it before applying it to raft, so this cannot
		// happen; every member would skip it alike.
		sm.Log.Error("skipping undecodable conf change entry", "index", e.Index, "error", err)
		return
	}
	changes, err := sm.checkConfChange(cc)
	if err == nil {
		for _, mc := range changes {
			sm.makeMemberChange(mc)
		}
	} else {
		sm.KV.PutAux(vetoBucket, vetoKey(e.Index), []byte(err.Error()))
		sm.Log.Warn("refused a configuration change; raft's configuration is unchanged too",
			"index", e.Index, "error", err)
	}
	if proposal != 0 {
		res := Result{Resp: sm.Cluster.Members()}
		if err != nil {
			res = Result{Err: err}
		}
		sm.results = append(sm.results, pending{Pending: Pending{ID: proposal, Result: res}})
	}
}

// decodeConfChange decodes a conf-change entry and returns the ID of the
// proposal waiting for it (0: none, as for raft's bootstrap entries).
func decodeConfChange(e *raftpb.Entry) (raftpb.ConfChangeI, uint64, error) {
	if e.Type == raftpb.EntryConfChange {
		var cc raftpb.ConfChange
		if err := cc.Unmarshal(e.Data); err != nil {
			return nil, 0, fmt.Errorf("statemachine: decode conf change at %d: %w", e.Index, err)
		}
		return cc, cc.ID, nil
	}
	var cc raftpb.ConfChangeV2
	if err := cc.Unmarshal(e.Data); err != nil {
		return nil, 0, fmt.Errorf("statemachine: decode conf change at %d: %w", e.Index, err)
	}
	return cc, 0, nil
}

// checkConfChange decodes the changes of cc and checks each against the
// member list; the first refusal refuses the whole entry. (MetaStore
// proposes single changes only; a ConfChangeV2 is checked change by
// change against the list as it is before the entry.)
func (sm *StateMachine) checkConfChange(cc raftpb.ConfChangeI) ([]memberChange, error) {
	var changes []memberChange
	if v1, ok := cc.AsV1(); ok {
		mc, err := sm.checkMemberChange(v1)
		if err != nil {
			return nil, err
		}
		return append(changes, mc), nil
	}
	v2 := cc.AsV2()
	for _, single := range v2.Changes {
		mc, err := sm.checkMemberChange(raftpb.ConfChange{Type: single.Type, NodeID: single.NodeID, Context: v2.Context})
		if err != nil {
			return nil, err
		}
		changes = append(changes, mc)
	}
	return changes, nil
}

func (sm *StateMachine) checkMemberChange(cc raftpb.ConfChange) (memberChange, error) {
	c := sm.Cluster
	mc := memberChange{cc: cc}
	switch cc.Type {
	case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
		if len(cc.Context) == 0 {
			return mc, nil // a bootstrap entry without a member record
		}
		var m membershippb.Member
		if err := m.Unmarshal(cc.Context); err != nil {
			return mc, fmt.Errorf("statemachine: decode member of conf change: %w", err)
		}
		if m.ID != cc.NodeID {
			return mc, fmt.Errorf("statemachine: conf change for node %x carries member %x", cc.NodeID, m.ID)
		}
		mc.member = &m
		if cc.Type == raftpb.ConfChangeAddNode && c.Member(m.ID) != nil {
			mc.promote = true
			return mc, c.ValidatePromote(m.ID)
		}
		return mc, c.ValidateAdd(&m, math.MaxInt)
	case raftpb.ConfChangeRemoveNode:
		return mc, c.ValidateRemove(cc.NodeID)
	case raftpb.ConfChangeUpdateNode:
		var m membershippb.Member
		if err := m.Unmarshal(cc.Context); err != nil || m.RaftAttributes == nil {
			return mc, fmt.Errorf("statemachine: decode member of conf change: %w", errors.Join(err, errors.New("no peer URLs")))
		}
		mc.member = &m
		return mc, c.ValidateUpdate(cc.NodeID, m.RaftAttributes.PeerUrls)
	}
	return mc, fmt.Errorf("statemachine: unknown conf change type %v", cc.Type)
}

// makeMemberChange applies a checked change to the member list, in the
// store batch of the entry.
func (sm *StateMachine) makeMemberChange(mc memberChange) {
	kv, c := sm.KV, sm.Cluster
	switch mc.cc.Type {
	case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
		if mc.member == nil {
			return
		}
		if mc.promote {
			c.Promote(kv, mc.member.ID)
		} else {
			c.Add(kv, mc.member)
		}
	case raftpb.ConfChangeRemoveNode:
		c.Remove(kv, mc.cc.NodeID)
	case raftpb.ConfChangeUpdateNode:
		c.SetPeerURLs(kv, mc.cc.NodeID, mc.member.RaftAttributes.PeerUrls)
	}
	sm.membersChanged = true
}

// recordedVeto answers for a conf change the store already holds: nil if
// it took effect, the recorded reason if it was refused.
func (sm *StateMachine) recordedVeto(index uint64) error {
	key := vetoKey(index)
	var reason []byte
	found := false
	err := sm.KV.AscendAux(vetoBucket, func(k, v []byte) bool {
		if string(k) == string(key) {
			reason, found = append([]byte(nil), v...), true
			return false
		}
		return true
	})
	if err != nil {
		// Without the record the decision is unknown; the member cannot
		// keep raft's configuration in step and stops.
		err = fmt.Errorf("read the record of conf change %d: %w", index, err)
		sm.Fatal("replay conf change", err)
		return err
	}
	if !found {
		return nil
	}
	return fmt.Errorf("statemachine: conf change %d was refused when applied: %s", index, reason)
}

func vetoKey(index uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), index)
}
