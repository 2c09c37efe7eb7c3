package linearizability

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// The membership fault changes the cluster's configuration while the
// other faults run, one step per injection, cycling through
//
//	add     member add --learner of the slot outside the cluster (its data
//	        dir wiped), which then starts and catches up
//	promote member promote of that learner, retried until it is in sync
//	remove  member remove of a random voter (possibly the leader), whose
//	        process is then killed; its slot is the next one added
//
// so the cluster has 3 voters, then 3 voters and a learner, then 4 voters,
// then 3 again: a quorum always survives the one member the other faults
// injure at a time. The slots (framework members with fixed ports) are
// m0..m3; clients and watchers are bound to all four, and those on the
// slot outside the cluster fail and back off until it is added again.

const (
	// reconfigTimeout bounds one membership step, retries included:
	// promotion waits for the learner to catch up, and etcd refuses a
	// reconfiguration until enough members have been connected for 5 s.
	reconfigTimeout = 90 * time.Second
	// reconfigCallTimeout bounds one Cluster RPC.
	reconfigCallTimeout = 5 * time.Second
	// reconfigBackoff is the pause between two attempts.
	reconfigBackoff = 250 * time.Millisecond
)

// membership tracks which slots are in the cluster and drives the steps.
// Only the nemesis' goroutine uses it while the run lasts, then the test's.
type membership struct {
	cluster *framework.Cluster
	cli     *clientv3.Client // over every slot; the outsider fails over
	rng     *rand.Rand

	ids      map[string]uint64 // member ID of each slot in the cluster
	learner  string            // the slot that is a learner, "" if none
	outsider string            // the slot outside the cluster
	adds     int
	promotes int
	removes  int
	replaced int // by the disk faults (replace)
}

// newMembership learns the members' IDs of a running 3-member cluster and,
// with spare (the membership fault), prepares a fourth slot (not started)
// beside it. Without spare it serves the disk faults' replacements only
// (replace).
func newMembership(ctx context.Context, t *testing.T, c *framework.Cluster, seed uint64, spare bool) (*membership, error) {
	inCluster := len(c.Members())
	cli := c.NewClient(t)
	ms := &membership{cluster: c, cli: cli, rng: rand.New(rand.NewPCG(seed, 0x6d656d)), ids: map[string]uint64{}}
	if spare {
		m, err := c.NewJoiningMember(fmt.Sprintf("m%d", inCluster))
		if err != nil {
			return nil, err
		}
		ms.outsider = m.Name()
	}
	err := ms.retry(ctx, "member list", func(ctx context.Context) error {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, m := range resp.Members {
			ms.ids[m.Name] = m.ID
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ms.ids) != inCluster {
		return nil, fmt.Errorf("member list names %d members, want %d", len(ms.ids), inCluster)
	}
	return ms, nil
}

// members are the slots in the cluster (voters and the learner).
func (ms *membership) members() []*framework.Member {
	var in []*framework.Member
	for _, m := range ms.cluster.Members() {
		if _, ok := ms.ids[m.Name()]; ok {
			in = append(in, m)
		}
	}
	return in
}

func (ms *membership) member(name string) *framework.Member {
	for _, m := range ms.cluster.Members() {
		if m.Name() == name {
			return m
		}
	}
	panic("no slot " + name) // the names come from the cluster's own list
}

// step takes the next membership step; it returns its name.
func (ms *membership) step(ctx context.Context) (string, error) {
	switch {
	case ms.learner != "":
		what := "promote " + ms.learner
		return what, ms.promote(ctx)
	case ms.outsider != "":
		what := "add learner " + ms.outsider
		return what, ms.addLearner(ctx)
	default:
		in := ms.members()
		victim := in[ms.rng.IntN(len(in))].Name()
		return "remove " + victim, ms.remove(ctx, victim)
	}
}

// settle promotes a pending learner, so every member serves
// linearizable reads and watches for the final checks.
func (ms *membership) settle(ctx context.Context) error {
	if ms.learner == "" {
		return nil
	}
	return ms.promote(ctx)
}

func (ms *membership) addLearner(ctx context.Context) error {
	m := ms.member(ms.outsider)
	if err := wipeDataDir(m.DataDir()); err != nil {
		return fmt.Errorf("wipe %s's data dir: %w", m.Name(), err)
	}
	if err := ms.add(ctx, m, true); err != nil {
		return err
	}
	ms.learner, ms.outsider = m.Name(), ""
	ms.adds++
	return ms.join(m)
}

// add announces m's peer URL with member add (--learner if asLearner) and
// records its new ID.
func (ms *membership) add(ctx context.Context, m *framework.Member, asLearner bool) error {
	what := "member add " + m.Name()
	if asLearner {
		what = "member add --learner " + m.Name()
	}
	var id uint64
	err := ms.retry(ctx, what, func(ctx context.Context) error {
		add := ms.cli.MemberAdd
		if asLearner {
			add = ms.cli.MemberAddAsLearner
		}
		resp, err := add(ctx, []string{m.PeerURL()})
		if errors.Is(err, rpctypes.ErrPeerURLExist) {
			// An earlier attempt took effect without its answer arriving.
			id, err = ms.idOf(ctx, m.PeerURL())
			return err
		}
		if err != nil {
			return err
		}
		id = resp.Member.ID
		return nil
	})
	if err != nil {
		return err
	}
	ms.ids[m.Name()] = id
	return nil
}

// join starts m, just added, on an empty data dir with the cluster's
// members (m included) as its --initial-cluster.
func (ms *membership) join(m *framework.Member) error {
	var initial []string
	for _, in := range ms.members() {
		initial = append(initial, in.Name()+"="+in.PeerURL())
	}
	return m.Join(strings.Join(initial, ","))
}

// replace brings back a member whose data is gone or unusable the way an
// operator does: stop it, wipe its data dir, member remove it, member add
// it again (as a learner if it was one) and start it with
// --initial-cluster-state=existing; it catches up from the leader, by
// snapshot.
func (ms *membership) replace(ctx context.Context, name string) error {
	m := ms.member(name)
	if m.Running() {
		if _, err := m.Kill(); err != nil && m.Running() {
			return err
		}
	}
	if err := wipeDataDir(m.DataDir()); err != nil {
		return fmt.Errorf("wipe %s's data dir: %w", name, err)
	}
	if err := ms.memberRemove(ctx, name); err != nil {
		return err
	}
	if err := ms.add(ctx, m, ms.learner == name); err != nil {
		return err // fails the test: the slot is left outside the cluster
	}
	ms.replaced++
	return ms.join(m)
}

// wipeDataDir empties a member's data dir, keeping the directory itself:
// it may be a mount point (the diskfull fault's tmpfs).
func wipeDataDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// idOf finds the member ID announced for peerURL.
func (ms *membership) idOf(ctx context.Context, peerURL string) (uint64, error) {
	resp, err := ms.cli.MemberList(ctx)
	if err != nil {
		return 0, err
	}
	for _, m := range resp.Members {
		for _, u := range m.PeerURLs {
			if u == peerURL {
				return m.ID, nil
			}
		}
	}
	return 0, fmt.Errorf("no member announces %s", peerURL)
}

func (ms *membership) promote(ctx context.Context) error {
	name := ms.learner
	err := ms.retry(ctx, "member promote "+name, func(ctx context.Context) error {
		_, err := ms.cli.MemberPromote(ctx, ms.ids[name])
		if errors.Is(err, rpctypes.ErrMemberNotLearner) {
			return nil // an earlier attempt took effect
		}
		return err
	})
	if err != nil {
		return err
	}
	ms.learner = ""
	ms.promotes++
	return nil
}

// memberRemove removes name from the cluster, retried until it has taken
// effect, and forgets its ID.
func (ms *membership) memberRemove(ctx context.Context, name string) error {
	err := ms.retry(ctx, "member remove "+name, func(ctx context.Context) error {
		_, err := ms.cli.MemberRemove(ctx, ms.ids[name])
		if errors.Is(err, rpctypes.ErrMemberNotFound) {
			return nil // an earlier attempt took effect
		}
		return err
	})
	if err != nil {
		return err
	}
	delete(ms.ids, name)
	return nil
}

func (ms *membership) remove(ctx context.Context, name string) error {
	if err := ms.memberRemove(ctx, name); err != nil {
		return err
	}
	ms.outsider = name
	ms.removes++
	// A removed member stops by itself once it applies its removal, but
	// may not learn of it if it was cut off; its slot is reused.
	m := ms.member(name)
	if m.Running() {
		if _, err := m.Kill(); err != nil && m.Running() {
			return err
		}
	}
	return nil
}

// retry repeats op until it succeeds or reconfigTimeout passes: under
// the other faults a reconfiguration meets lost leaders, timeouts, too
// few members connected, and learners not yet in sync.
func (ms *membership) retry(ctx context.Context, what string, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reconfigTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		octx, ocancel := context.WithTimeout(ctx, reconfigCallTimeout)
		err := op(octx)
		ocancel()
		if err == nil {
			return nil
		}
		if !sleepCtx(ctx, reconfigBackoff) {
			return fmt.Errorf("%s: still failing after %d attempts: %w", what, attempt, err)
		}
	}
}

func (ms *membership) summary() string {
	return fmt.Sprintf("%d learners added, %d promoted, %d members removed", ms.adds, ms.promotes, ms.removes)
}
