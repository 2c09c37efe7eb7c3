package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// clusterTestTimeout is the deadline of one multi-member test.
	clusterTestTimeout = 3 * time.Minute
	// electionTimeout is --election-timeout at its default (1000 ms), which
	// the multi-member tests run with, as production would.
	electionTimeout = time.Second
	// leaderBound is how long a cluster may take to agree on a leader
	// after losing one: a few election timeouts, with slack for a loaded
	// 2-core machine.
	leaderBound = 10 * electionTimeout
	// probeTimeout bounds one status or read probe of one member.
	probeTimeout = 2 * time.Second
	// pollInterval spaces probes while waiting for a cluster event.
	pollInterval = 50 * time.Millisecond
)

// memberClients holds one client per member, each bound to that member
// only, so that a request is served by the member the test means.
type memberClients struct {
	cluster *framework.Cluster
	clis    map[*framework.Member]*clientv3.Client
}

func newMemberClients(t *testing.T, c *framework.Cluster) *memberClients {
	t.Helper()
	mc := &memberClients{cluster: c, clis: map[*framework.Member]*clientv3.Client{}}
	for _, m := range c.Members() {
		mc.clis[m] = m.NewClient(t)
	}
	return mc
}

// of returns the client bound to m, creating it for a member that joined
// after newMemberClients.
func (mc *memberClients) of(t *testing.T, m *framework.Member) *clientv3.Client {
	t.Helper()
	if cli, ok := mc.clis[m]; ok {
		return cli
	}
	cli := m.NewClient(t)
	mc.clis[m] = cli
	return cli
}

// status asks member m for its Maintenance status.
func (mc *memberClients) status(ctx context.Context, t *testing.T, m *framework.Member) (*pb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return pb.NewMaintenanceClient(mc.of(t, m).ActiveConnection()).Status(ctx, &pb.StatusRequest{})
}

// waitLeader waits until every member in ms reports the same leader, one
// of ms, and returns it.
func (mc *memberClients) waitLeader(ctx context.Context, t *testing.T, ms []*framework.Member) *framework.Member {
	t.Helper()
	var last error
	for {
		leader, err := mc.agreedLeader(ctx, t, ms)
		if err == nil {
			return leader
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("no agreed leader among %v: %v (last: %v)", names(ms), ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

func (mc *memberClients) agreedLeader(ctx context.Context, t *testing.T, ms []*framework.Member) (*framework.Member, error) {
	var leaderID uint64
	var leader *framework.Member
	for _, m := range ms {
		st, err := mc.status(ctx, t, m)
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", m.Name(), err)
		}
		if st.Leader == 0 {
			return nil, fmt.Errorf("%s knows no leader", m.Name())
		}
		if leaderID != 0 && st.Leader != leaderID {
			return nil, fmt.Errorf("%s follows %x, others %x", m.Name(), st.Leader, leaderID)
		}
		leaderID = st.Leader
		if st.Header.MemberId == st.Leader {
			leader = m
		}
	}
	if leader == nil {
		return nil, fmt.Errorf("leader %x is not among %v", leaderID, names(ms))
	}
	return leader, nil
}

// memberID is m's ID as it reports it.
func (mc *memberClients) memberID(ctx context.Context, t *testing.T, m *framework.Member) uint64 {
	t.Helper()
	st, err := mc.status(ctx, t, m)
	if err != nil {
		t.Fatalf("status of %s: %v", m.Name(), err)
	}
	return st.Header.MemberId
}

// requireSameHashKV checks that every member in ms has the same key
// history hash at rev. Each member first serves a linearizable read, so
// it has applied rev.
func (mc *memberClients) requireSameHashKV(ctx context.Context, t *testing.T, ms []*framework.Member, rev int64) {
	t.Helper()
	var first *pb.HashKVResponse
	for _, m := range ms {
		cli := mc.of(t, m)
		if _, err := cli.Get(ctx, "/e2e/hashkv-barrier"); err != nil {
			t.Fatalf("linearizable read on %s: %v", m.Name(), err)
		}
		h, err := cli.HashKV(ctx, m.ClientURL(), rev)
		if err != nil {
			t.Fatalf("hashkv on %s at %d: %v", m.Name(), rev, err)
		}
		if first == nil {
			first = (*pb.HashKVResponse)(h)
			continue
		}
		if h.Hash != first.Hash || h.CompactRevision != first.CompactRevision {
			t.Fatalf("hashkv at %d on %s: hash %d compact %d; on %s: hash %d compact %d",
				rev, ms[0].Name(), first.Hash, first.CompactRevision, m.Name(), h.Hash, h.CompactRevision)
		}
	}
}

// others returns ms without x.
func others(ms []*framework.Member, x *framework.Member) []*framework.Member {
	return slices.DeleteFunc(slices.Clone(ms), func(m *framework.Member) bool { return m == x })
}

func names(ms []*framework.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name()
	}
	return out
}

// isUnavailable reports whether err is how a member refuses or fails a
// request it cannot serve for lack of a leader or quorum: etcd's no-leader
// and timeout errors, or the deadline of the caller.
func isUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	for _, text := range []string{
		"etcdserver: no leader",
		"etcdserver: request timed out",
		"context deadline exceeded",
	} {
		if containsText(err, text) {
			return true
		}
	}
	return false
}

func containsText(err error, text string) bool {
	return err != nil && strings.Contains(err.Error(), text)
}

// waitForLog waits (up to rotationTimeout) until m's log (every run so
// far) has text. A server may write a line just after the state a test
// waited for is visible: a refusal is logged around when the client sees
// it, and etcd logs "applied incoming Raft snapshot" on its raft
// goroutine while its apply goroutine already serves the snapshot's
// index; so the log is polled, never read once.
func waitForLog(ctx context.Context, t *testing.T, m *framework.Member, text string) {
	t.Helper()
	waitFor(ctx, t, fmt.Sprintf("%q in the log of %s", text, m.Name()), func() error {
		data, err := os.ReadFile(m.LogPath())
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), text) {
			return fmt.Errorf("not there yet")
		}
		return nil
	})
}
