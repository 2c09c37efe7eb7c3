package raftnode

import (
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// forceNewCluster is etcd's --force-new-cluster on restart: the entries
// past the commit index are dropped, and conf-change entries removing
// every other member of the configuration (the snapshot's, updated by the
// committed conf changes after it) are appended to the log and committed
// at once, so this member becomes a one-member cluster with its data. The
// state machine applies the removals like any others (the server's member
// list follows). Restarting with the flag again changes nothing: the
// member is alone already.
func (n *Node) forceNewCluster(snap raftpb.SnapshotMetadata, ents []raftpb.Entry, hs raftpb.HardState) ([]raftpb.Entry, raftpb.HardState, error) {
	for i, e := range ents {
		if e.Index > hs.Commit {
			n.logger.Info("discarding uncommitted WAL entries", "entry-index", e.Index,
				"commit-index-from-wal", hs.Commit, "number-of-discarded-entries", len(ents)-i)
			ents = ents[:i]
			break
		}
	}
	ids, err := effectiveMembers(snap.ConfState, ents)
	if err != nil {
		return nil, hs, err
	}
	if !slices.Contains(ids, n.cfg.ID) {
		return nil, hs, fmt.Errorf("raftnode: --force-new-cluster: member %x is not in its own configuration %x", n.cfg.ID, ids)
	}
	last := snap.Index
	if len(ents) > 0 {
		last = ents[len(ents)-1].Index
	}
	var removals []raftpb.Entry
	for _, id := range ids {
		if id == n.cfg.ID {
			continue
		}
		cc := raftpb.ConfChange{Type: raftpb.ConfChangeRemoveNode, NodeID: id}
		data, err := cc.Marshal()
		if err != nil {
			return nil, hs, fmt.Errorf("raftnode: encode removal of %x: %w", id, err)
		}
		last++
		removals = append(removals, raftpb.Entry{Type: raftpb.EntryConfChange, Term: hs.Term, Index: last, Data: data})
	}
	oldCommit := hs.Commit
	if len(removals) > 0 {
		hs.Commit = last
		if err := n.wal.Save(hs, removals); err != nil {
			return nil, hs, fmt.Errorf("raftnode: --force-new-cluster: save conf changes: %w", err)
		}
		ents = append(ents, removals...)
	}
	n.logger.Info("forcing restart member", "cluster-id", fmt.Sprintf("%x", n.cfg.ClusterID),
		"local-member-id", fmt.Sprintf("%x", n.cfg.ID), "wal-commit-index", oldCommit, "commit-index", hs.Commit,
		"removed-members", len(removals))
	return ents, hs, nil
}

// effectiveMembers is the configuration after the snapshot's ConfState and
// the conf changes among ents: every voter and learner, sorted.
func effectiveMembers(cs raftpb.ConfState, ents []raftpb.Entry) ([]uint64, error) {
	set := map[uint64]bool{}
	for _, ids := range [][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		for _, id := range ids {
			set[id] = true
		}
	}
	apply := func(t raftpb.ConfChangeType, id uint64) {
		switch t {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
			set[id] = true
		case raftpb.ConfChangeRemoveNode:
			delete(set, id)
		}
	}
	for _, e := range ents {
		switch e.Type {
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := cc.Unmarshal(e.Data); err != nil {
				return nil, fmt.Errorf("raftnode: decode conf change at %d: %w", e.Index, err)
			}
			apply(cc.Type, cc.NodeID)
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if err := cc.Unmarshal(e.Data); err != nil {
				return nil, fmt.Errorf("raftnode: decode conf change at %d: %w", e.Index, err)
			}
			for _, c := range cc.Changes {
				apply(c.Type, c.NodeID)
			}
		}
	}
	delete(set, 0) // a vetoed change's no-op
	ids := make([]uint64, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}
