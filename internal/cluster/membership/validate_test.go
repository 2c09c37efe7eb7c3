package membership

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/membershippb"
)

func member(id uint64, url string, learner, started bool) *membershippb.Member {
	m := &membershippb.Member{ID: id, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{url}, IsLearner: learner}}
	if started {
		m.MemberAttributes = &membershippb.Attributes{Name: "n"}
	}
	return m
}

// threeMembers is voters 1 (started), 2 (started), 3 (not started) and
// learner 4, with member 9 removed.
func threeMembers() *Cluster {
	store := auxMap{}
	c := New(1, 99)
	c.Add(store, member(1, "http://a:2380", false, true))
	c.Add(store, member(2, "http://b:2380", false, true))
	c.Add(store, member(3, "http://c:2380", false, false))
	c.Add(store, member(4, "http://d:2380", true, true))
	c.Add(store, member(9, "http://z:2380", false, true))
	c.Remove(store, 9)
	return c
}

func TestValidateChanges(t *testing.T) {
	c := threeMembers()
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"add new voter", c.ValidateAdd(member(5, "http://e:2380", false, false), 1), nil},
		{"add existing ID", c.ValidateAdd(member(2, "http://e:2380", false, false), 1), ErrIDExists},
		{"add removed ID", c.ValidateAdd(member(9, "http://e:2380", false, false), 1), ErrIDRemoved},
		{"add taken peer URL", c.ValidateAdd(member(5, "http://b:2380", false, false), 1), ErrPeerURLExists},
		{"add second learner", c.ValidateAdd(member(5, "http://e:2380", true, false), 1), ErrTooManyLearners},
		{"add second learner, two allowed", c.ValidateAdd(member(5, "http://e:2380", true, false), 2), nil},
		{"promote learner", c.ValidatePromote(4), nil},
		{"promote voter", c.ValidatePromote(2), ErrMemberNotLearner},
		{"promote stranger", c.ValidatePromote(7), ErrIDNotFound},
		{"promote removed", c.ValidatePromote(9), ErrIDRemoved},
		{"remove member", c.ValidateRemove(3), nil},
		{"remove stranger", c.ValidateRemove(7), ErrIDNotFound},
		{"remove removed", c.ValidateRemove(9), ErrIDRemoved},
		{"update own URLs", c.ValidateUpdate(2, []string{"http://b:2380", "http://b2:2380"}), nil},
		{"update to a taken URL", c.ValidateUpdate(2, []string{"http://a:2380"}), ErrPeerURLExists},
		{"update stranger", c.ValidateUpdate(7, []string{"http://e:2380"}), ErrIDNotFound},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, tc.want) || (tc.want == nil && tc.err != nil) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if got := len(c.VotingMembers()); got != 3 {
		t.Errorf("%d voting members, want 3", got)
	}
}

// The quorum guards count started voters, as etcd's IsReadyTo* do.
func TestQuorumGuards(t *testing.T) {
	c := threeMembers() // voters: 2 started of 3
	if c.ReadyToAddVoter() {
		t.Error("adding a 4th voter with 2 of 3 started (2 of 4 < quorum 3) allowed")
	}
	store := auxMap{}
	c.Add(store, member(3, "http://c:2380", false, true)) // now 3 of 3 started
	if !c.ReadyToAddVoter() {
		t.Error("adding a 4th voter with 3 of 3 started (3 of 4 >= quorum 3) refused")
	}
	c.Add(store, member(6, "http://f:2380", false, false))
	c.Add(store, member(3, "http://c:2380", false, false)) // 2 of 4 started
	if c.ReadyToRemoveVoter(1) {
		t.Error("removing started voter 1 leaves 1 of 3 started (quorum 2), allowed")
	}
	if !c.ReadyToRemoveVoter(3) {
		t.Error("removing unstarted voter 3 leaves 2 of 3 started, refused")
	}
	if !c.ReadyToPromote() {
		t.Error("promoting with 2 of 4 voters started plus the learner (3 of 5) refused")
	}
	single := New(1, 1)
	single.Add(store, member(1, "http://a:2380", false, true))
	if !single.ReadyToAddVoter() {
		t.Error("growing a one-member cluster refused")
	}
}
