package membership

import (
	"errors"
	"slices"

	"go.etcd.io/etcd/api/v3/membershippb"
)

// Errors of membership changes. Their texts are etcd's, and the client
// layer maps each to the gRPC status etcd returns for it.
var (
	ErrIDRemoved        = errors.New("membership: ID removed")
	ErrIDExists         = errors.New("membership: ID exists")
	ErrIDNotFound       = errors.New("membership: ID not found")
	ErrPeerURLExists    = errors.New("membership: peerURL exists")
	ErrMemberNotLearner = errors.New("membership: can only promote a learner member")
	ErrTooManyLearners  = errors.New("membership: too many learner members in cluster")
)

// DefaultMaxLearners is etcd's --max-learners default.
const DefaultMaxLearners = 1

// ValidateAdd checks that m may join: its ID was never used, none of its
// peer URLs belongs to another member, and a learner does not push the
// learner count past maxLearners (etcd's ValidateConfigurationChange).
func (c *Cluster) ValidateAdd(m *membershippb.Member, maxLearners int) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.removed[m.ID] {
		return ErrIDRemoved
	}
	if _, ok := c.members[m.ID]; ok {
		return ErrIDExists
	}
	var urls []string
	if m.RaftAttributes != nil {
		urls = m.RaftAttributes.PeerUrls
	}
	if c.peerURLTakenLocked(0, urls) {
		return ErrPeerURLExists
	}
	if m.RaftAttributes != nil && m.RaftAttributes.IsLearner {
		learners := 1
		for _, other := range c.members {
			if isLearner(other) {
				learners++
			}
		}
		if learners > maxLearners {
			return ErrTooManyLearners
		}
	}
	return nil
}

// ValidatePromote checks that id names a learner.
func (c *Cluster) ValidatePromote(id uint64) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.removed[id] {
		return ErrIDRemoved
	}
	m, ok := c.members[id]
	if !ok {
		return ErrIDNotFound
	}
	if !isLearner(m) {
		return ErrMemberNotLearner
	}
	return nil
}

// ValidateRemove checks that id names a current member.
func (c *Cluster) ValidateRemove(id uint64) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.removed[id] {
		return ErrIDRemoved
	}
	if _, ok := c.members[id]; !ok {
		return ErrIDNotFound
	}
	return nil
}

// ValidateUpdate checks that id names a current member and that no other
// member uses any of peerURLs.
func (c *Cluster) ValidateUpdate(id uint64, peerURLs []string) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.removed[id] {
		return ErrIDRemoved
	}
	if _, ok := c.members[id]; !ok {
		return ErrIDNotFound
	}
	if c.peerURLTakenLocked(id, peerURLs) {
		return ErrPeerURLExists
	}
	return nil
}

// peerURLTakenLocked reports whether a member other than except uses one of
// urls.
func (c *Cluster) peerURLTakenLocked(except uint64, urls []string) bool {
	for id, other := range c.members {
		if id == except || other.RaftAttributes == nil {
			continue
		}
		for _, u := range urls {
			if slices.Contains(other.RaftAttributes.PeerUrls, u) {
				return true
			}
		}
	}
	return false
}

// VotingMembers returns copies of the members that are not learners,
// ordered by ID.
func (c *Cluster) VotingMembers() []*membershippb.Member {
	all := c.Members()
	voters := all[:0]
	for _, m := range all {
		if !isLearner(m) {
			voters = append(voters, m)
		}
	}
	return voters
}

// IsStarted reports whether a member has published its name, which it does
// once it runs (etcd's Member.IsStarted).
func IsStarted(m *membershippb.Member) bool {
	return m.MemberAttributes != nil && m.MemberAttributes.Name != ""
}

func isLearner(m *membershippb.Member) bool {
	return m.RaftAttributes != nil && m.RaftAttributes.IsLearner
}

// The quorum checks below are etcd's --strict-reconfig-check guards: they
// count started voters and refuse a change after which fewer than a quorum
// of the new voter set would have started.

// ReadyToAddVoter reports whether adding one (not yet started) voter keeps
// a started quorum. Adding a second member to a one-member cluster is
// always allowed: it is how a cluster is grown from a restored backup.
func (c *Cluster) ReadyToAddVoter() bool {
	members, started := 1, 0 // the new member counts, not started
	for _, m := range c.VotingMembers() {
		if IsStarted(m) {
			started++
		}
		members++
	}
	if started == 1 && members == 2 {
		return true
	}
	return started >= members/2+1
}

// ReadyToRemoveVoter reports whether the voters other than id keep a
// started quorum among themselves.
func (c *Cluster) ReadyToRemoveVoter(id uint64) bool {
	members, started := 0, 0
	for _, m := range c.VotingMembers() {
		if m.ID == id {
			continue
		}
		if IsStarted(m) {
			started++
		}
		members++
	}
	return started >= members/2+1
}

// ReadyToPromote reports whether the voters plus the promoted learner
// (counted as started) keep a started quorum.
func (c *Cluster) ReadyToPromote() bool {
	members, started := 1, 1
	for _, m := range c.VotingMembers() {
		if IsStarted(m) {
			started++
		}
		members++
	}
	return started >= members/2+1
}
