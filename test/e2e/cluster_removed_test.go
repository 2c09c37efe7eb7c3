package e2e

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/metastore-io/metastore/test/framework"
)

// removedExitTimeout bounds how long a removed member may run on once it
// can know of its removal: etcd stops within a second.
const removedExitTimeout = 10 * time.Second

// TestRemovedLeaderExitsCleanly removes the leader with the stock etcdctl:
// it commits and applies its own removal, says (as etcd does) that its
// data dir must be removed, and exits 0, so that a supervisor restarting
// it on failure leaves it stopped.
func TestRemovedLeaderExitsCleanly(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	mc := newMemberClients(t, c)
	leader := mc.waitLeader(ctx, t, c.Members())
	runEtcdctlRetrying(ctx, t, c.Etcdctl(), "member", "remove", strconv.FormatUint(mc.memberID(ctx, t, leader), 16))
	requireRemovedExit(ctx, t, leader)
	rest := others(c.Members(), leader)
	mc.waitLeader(ctx, t, rest)
	if got := memberList(ctx, t, c.Etcdctl()); len(got.Members) != 2 {
		t.Fatalf("member list after removing the leader has %d members, want 2: %+v", len(got.Members), got.Members)
	}
}

// TestRemovedUnreachableMemberExits removes a member that cannot hear the
// cluster (paused): it never receives the entry that removes it. Once it
// runs again the others refuse its peer traffic as a removed member's,
// and that refusal alone must stop it, as it stops etcd.
func TestRemovedUnreachableMemberExits(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	mc := newMemberClients(t, c)
	leader := mc.waitLeader(ctx, t, c.Members())
	victim := others(c.Members(), leader)[0]
	victimID := mc.memberID(ctx, t, victim)
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = victim.Resume()
		}
	}()
	removeMemberRetrying(ctx, t, mc, leader, victimID)
	if err := victim.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	requireRemovedExit(ctx, t, victim)
}

// removeMemberRetrying removes member id through via, retrying while the
// cluster counts too few members active for the change (etcd's
// strict reconfiguration check).
func removeMemberRetrying(ctx context.Context, t *testing.T, mc *memberClients, via *framework.Member, id uint64) {
	t.Helper()
	for {
		_, err := mc.of(t, via).MemberRemove(ctx, id)
		if err == nil {
			return
		}
		if !errors.Is(err, rpctypes.ErrUnhealthy) {
			t.Fatalf("remove member %x: %v", id, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("remove member %x: still %v", id, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// requireRemovedExit waits for removed member m to exit on its own, and
// checks that it exited 0 after etcd's lines.
func requireRemovedExit(ctx context.Context, t *testing.T, m *framework.Member) {
	t.Helper()
	select {
	case <-m.Exited():
	case <-time.After(removedExitTimeout):
		t.Fatalf("removed member %s still runs after %v", m.Name(), removedExitTimeout)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	status, _ := m.LastExit()
	if status.Signaled() || status.Code != 0 {
		t.Errorf("removed member %s ended with %s, want exit code 0", m.Name(), status)
	}
	// The process has ended: its log is complete.
	data, err := os.ReadFile(m.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		msg    string
		fields map[string]string
	}{
		{"server error", map[string]string{"error": `"the member has been permanently removed from the cluster"`}},
		{"data-dir used by this member must be removed", nil},
	} {
		if !slices.ContainsFunc(strings.Split(string(data), "\n"), func(line string) bool {
			return logLineMatches(line, want.msg, want.fields)
		}) {
			t.Errorf("removed member %s did not log %q %v", m.Name(), want.msg, want.fields)
		}
	}
}
