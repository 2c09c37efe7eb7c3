package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// membershipSnapshotCount is --snapshot-count in the membership test.
	membershipSnapshotCount = 100
	// membershipKeys is how many keys are written before a learner joins:
	// enough that every target compacted the log behind a snapshot (etcd
	// keeps 5000 entries behind each), so the learner cannot be fed from
	// the log and must receive a snapshot.
	membershipKeys = 5500
	// membershipWriters write those keys concurrently.
	membershipWriters = 16
)

// initialClusterLine is what `etcdctl member add` prints for the new
// member's --initial-cluster.
var initialClusterLine = regexp.MustCompile(`(?m)^ETCD_INITIAL_CLUSTER="([^"]+)"$`)

// TestClusterMembershipWithEtcdctl grows and shrinks a cluster with the
// stock etcdctl: a learner is added (refused promotion while it lags),
// joins with --initial-cluster-state=existing, catches up by snapshot, is
// promoted, and the old leader is removed; the cluster keeps serving.
func TestClusterMembershipWithEtcdctl(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, SnapshotCount: membershipSnapshotCount})
	mc := newMemberClients(t, c)
	etcdctl := c.Etcdctl()
	writeKeys(ctx, t, c.NewClient(t), "/members/before", membershipKeys)

	learner, err := c.NewJoiningMember("m3")
	if err != nil {
		t.Fatal(err)
	}
	added := runEtcdctlRetrying(ctx, t, etcdctl, "member", "add", learner.Name(), "--peer-urls="+learner.PeerURL(), "--learner")
	m := initialClusterLine.FindStringSubmatch(added)
	if m == nil {
		t.Fatalf("member add printed no ETCD_INITIAL_CLUSTER:\n%s", added)
	}
	learnerID := memberIDByPeerURL(ctx, t, etcdctl, learner.PeerURL())

	// Not even started: far from in sync with the leader.
	res, err := etcdctl.Run(ctx, "member", "promote", strconv.FormatUint(learnerID, 16))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "etcdserver: can only promote a learner member which is in sync with leader") {
		t.Fatalf("promote of a lagging learner: exit %d, stderr %q; want refused as not in sync", res.ExitCode, res.Stderr)
	}

	if err := learner.Join(m[1]); err != nil {
		t.Fatal(err)
	}
	// A trickle of writes while the learner catches up: etcd counts a
	// member that only installed a snapshot as having applied nothing
	// (and refuses its requests as "too many") until an entry follows.
	// The trickle is slow: the cluster is nearly idle, so the learner
	// cannot wait for snapshots that many new entries would bring.
	trickle := startTrickle(ctx, c.NewClient(t), "/trickle")
	catchUpCtx, cancel := context.WithTimeout(ctx, learnerCatchUpTimeout)
	waitCaughtUp(catchUpCtx, t, mc, c.Members()[:3], learner)
	cancel()
	trickle.stop(t)
	switch c.Target() {
	case framework.TargetMetaStore:
		waitForLog(ctx, t, learner, "installed snapshot from leader")
	case framework.TargetEtcd:
		waitForLog(ctx, t, learner, "applied incoming Raft snapshot")
	}

	// A learner serves only serializable reads and status.
	lcli := mc.of(t, learner)
	if _, err := lcli.Get(ctx, "/members/before/000000"); err == nil || !strings.Contains(err.Error(), "etcdserver: rpc not supported for learner") {
		t.Fatalf("linearizable read on a learner: %v, want refused as not supported for learner", err)
	}
	if got := mustGet(ctx, t, lcli, "/members/before/000000", clientv3.WithSerializable()); len(got.Kvs) != 1 {
		t.Fatalf("serializable read on the caught-up learner: %v", got.Kvs)
	}

	runEtcdctlRetrying(ctx, t, etcdctl, "member", "promote", strconv.FormatUint(learnerID, 16))
	list := memberList(ctx, t, etcdctl)
	if len(list.Members) != 4 {
		t.Fatalf("member list after promote has %d members, want 4: %+v", len(list.Members), list.Members)
	}
	for _, mem := range list.Members {
		if mem.IsLearner {
			t.Fatalf("member %s still a learner after promote", mem.Name)
		}
	}

	oldLeader := mc.waitLeader(ctx, t, c.Members())
	runEtcdctlRetrying(ctx, t, etcdctl, "member", "remove", strconv.FormatUint(mc.memberID(ctx, t, oldLeader), 16))
	rest := others(c.Members(), oldLeader)
	leaderCtx, cancel := context.WithTimeout(ctx, leaderBound)
	newLeader := mc.waitLeader(leaderCtx, t, rest)
	cancel()
	t.Logf("removed leader %s; %s leads %v", oldLeader.Name(), newLeader.Name(), names(rest))
	if got := memberList(ctx, t, c.Etcdctl()); len(got.Members) != 3 {
		t.Fatalf("member list after removing the leader has %d members, want 3: %+v", len(got.Members), got.Members)
	}
	resp := mustPut(ctx, t, mc.of(t, learner), "/members/after", "written via the promoted learner")
	for _, m := range rest {
		if got := mustGet(ctx, t, mc.of(t, m), "/members/", clientv3.WithPrefix(), clientv3.WithCountOnly()); got.Count != membershipKeys+1 {
			t.Fatalf("%s counts %d keys, want %d", m.Name(), got.Count, membershipKeys+1)
		}
	}
	mc.requireSameHashKV(ctx, t, rest, resp.Header.Revision)
}

// trickle writes one key every trickleInterval until stopped.
type trickle struct {
	cancel context.CancelFunc
	done   chan error
}

// trickleInterval paces the trickle: membershipSnapshotCount entries take
// far longer than learnerCatchUpTimeout.
const trickleInterval = 500 * time.Millisecond

// learnerCatchUpTimeout bounds a learner's catch-up by snapshot.
const learnerCatchUpTimeout = 30 * time.Second

func startTrickle(ctx context.Context, cli *clientv3.Client, key string) *trickle {
	ctx, cancel := context.WithCancel(ctx)
	tr := &trickle{cancel: cancel, done: make(chan error, 1)}
	go func() {
		tick := time.NewTicker(trickleInterval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				tr.done <- nil
				return
			case <-tick.C:
			}
			if _, err := cli.Put(ctx, key, strconv.Itoa(i)); err != nil && ctx.Err() == nil {
				tr.done <- fmt.Errorf("trickle put: %w", err)
				return
			}
		}
	}()
	return tr
}

func (tr *trickle) stop(t *testing.T) {
	t.Helper()
	tr.cancel()
	if err := <-tr.done; err != nil {
		t.Fatal(err)
	}
}

// writeKeys puts n keys under prefix with concurrent writers.
func writeKeys(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, membershipWriters)
	for w := range membershipWriters {
		wg.Go(func() {
			for i := w; i < n; i += membershipWriters {
				if _, err := cli.Put(ctx, fmt.Sprintf("%s/%06d", prefix, i), "v"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("write %d keys: %v", n, err)
	}
}

// runEtcdctlRetrying runs etcdctl until it succeeds. Membership changes are
// refused for a while after start-up or another change (etcd counts a peer
// as healthy once connected for 5 s; raft takes one change at a time), so
// "unhealthy cluster" and "not in sync" answers are retried.
func runEtcdctlRetrying(ctx context.Context, t *testing.T, e *framework.Etcdctl, args ...string) string {
	t.Helper()
	for {
		res, err := e.Run(ctx, args...)
		if err != nil {
			t.Fatalf("etcdctl %v: %v", args, err)
		}
		if res.ExitCode == 0 {
			return res.Stdout
		}
		transient := strings.Contains(res.Stderr, "etcdserver: unhealthy cluster") ||
			strings.Contains(res.Stderr, "in sync with leader") ||
			strings.Contains(res.Stderr, "etcdserver: request timed out")
		if !transient {
			t.Fatalf("etcdctl %v: exit %d: %s", args, res.ExitCode, withoutLogLines(res.Stderr))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("etcdctl %v kept failing: %s", args, res.Stderr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// withoutLogLines drops the JSON log lines etcdctl's client library
// writes to stderr, keeping etcdctl's own messages.
func withoutLogLines(stderr string) string {
	var kept []string
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(line, "{") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

func memberList(ctx context.Context, t *testing.T, e *framework.Etcdctl) etcdctlMemberList {
	t.Helper()
	res, err := e.Run(ctx, "member", "list", "-w", "json")
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("member list: %v exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	var list etcdctlMemberList
	if err := json.Unmarshal([]byte(res.Stdout), &list); err != nil {
		t.Fatalf("decode member list: %v\n%s", err, res.Stdout)
	}
	return list
}

func memberIDByPeerURL(ctx context.Context, t *testing.T, e *framework.Etcdctl, peerURL string) uint64 {
	t.Helper()
	for _, m := range memberList(ctx, t, e).Members {
		if len(m.PeerURLs) == 1 && m.PeerURLs[0] == peerURL {
			return m.ID
		}
	}
	t.Fatalf("no member with peer URL %s", peerURL)
	return 0
}

// waitCaughtUp waits until learner has applied the leader's commit index
// as it was when the wait began.
func waitCaughtUp(ctx context.Context, t *testing.T, mc *memberClients, voters []*framework.Member, learner *framework.Member) {
	t.Helper()
	leader := mc.waitLeader(ctx, t, voters)
	st, err := mc.status(ctx, t, leader)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ls, err := mc.status(ctx, t, learner)
		if err == nil && ls.RaftAppliedIndex >= st.RaftIndex {
			if !ls.IsLearner {
				t.Fatalf("%s reports it is not a learner", learner.Name())
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("learner %s did not catch up to index %d: %v (last status %v)", learner.Name(), st.RaftIndex, ctx.Err(), err)
		case <-learner.Exited():
			t.Fatalf("learner %s exited while catching up", learner.Name())
		case <-time.After(pollInterval):
		}
	}
}
