package linearizability

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

var (
	duration   = flag.Duration("lin.duration", 60*time.Second, "how long clients run under the nemesis")
	seedFlag   = flag.Uint64("lin.seed", 0, "seed of the clients' and the nemesis' choices (0: from the clock)")
	faultsFlag = flag.String("lin.faults", "all", "the nemesis' faults: all, or a comma-separated list of kill, pause, isolate, membership, tornwal, truncsnap, lostdata, diskfull, slowdisk, diskerror (the last two not in all)")
)

const (
	// clientsPerMember clients are bound to each member.
	clientsPerMember = 2
	// recoveryTimeout bounds start-up, the final recovery and the final
	// reads, on top of -lin.duration.
	recoveryTimeout = 3 * time.Minute
	// snapshotCount makes members snapshot often, so restarted members
	// catch up by snapshot under the nemesis too.
	snapshotCount = 500
	// seamShortDuration is make test's run of the seam faults.
	seamShortDuration = 20 * time.Second
)

func TestLinearizability(t *testing.T) {
	runLinearizability(t, *faultsFlag, *duration)
}

// TestLinearizabilityDiskSeam is make test's short run of the faults that
// need MetaStore's fault build (slowdisk, diskerror), which "all" leaves
// out so that its runs check the shipped binary. make test-faults-long
// FAULT=slowdisk (or diskerror) runs them longer, through
// TestLinearizability.
func TestLinearizabilityDiskSeam(t *testing.T) {
	runLinearizability(t, "slowdisk,diskerror", seamShortDuration)
}

func runLinearizability(t *testing.T, faultList string, duration time.Duration) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	faults, err := parseFaults(faultList)
	if err != nil {
		t.Fatal(err)
	}
	cfg := framework.ClusterConfig{Size: 3, PeerProxies: true, SnapshotCount: snapshotCount}
	if faults = useDiskSeam(t, faults, &cfg); len(faults) == 0 {
		t.Skip("no fault of " + faultList + " runs against this target")
	}
	t.Logf("seed %d (rerun with -lin.seed=%d), duration %v, faults %s", seed, seed, duration, faultList)
	ctx, cancel := context.WithTimeout(t.Context(), duration+recoveryTimeout)
	defer cancel()
	disk, err := newDiskFaults(t, faults, seed)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PrepareDataDir = disk.prepareDataDir()
	c := framework.NewCluster(t, cfg)
	clusterID := readClusterID(ctx, t, c)
	var ms *membership
	if reconfig := slices.Contains(faults, faultReconfigure); reconfig || slices.ContainsFunc(faults, isDiskFault) {
		// The membership fault adds a fourth slot, outside the cluster
		// until the nemesis adds it: clients and watchers are bound
		// to it too.
		if ms, err = newMembership(ctx, t, c, seed, reconfig); err != nil {
			t.Fatal(err)
		}
	}

	hist := newHistory()
	var clients []*client
	for i, m := range c.Members() {
		for j := range clientsPerMember {
			cl, err := newClient(i*clientsPerMember+j, m.Endpoint(), clusterID, seed, hist)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.close()
			clients = append(clients, cl)
		}
	}

	names, endpoints := memberEndpoints(c.Members())
	var watchers []*watcher
	for i := range watchersCount {
		w, err := newWatcher(i, names, endpoints, clusterID, seed)
		if err != nil {
			t.Fatal(err)
		}
		defer w.close()
		watchers = append(watchers, w)
	}

	runCtx, stopRun := context.WithTimeout(ctx, duration)
	defer stopRun()
	nem := newNemesis(t, c, faults, ms, disk, seed)
	nemErr := make(chan error, 1)
	go func() { nemErr <- nem.run(runCtx) }()
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() { cl.run(runCtx) })
	}
	for _, w := range watchers {
		wg.Go(func() { w.run(runCtx) })
	}
	wg.Wait()
	if err := <-nemErr; err != nil {
		t.Fatalf("nemesis: %v", err)
	}
	t.Logf("nemesis: %s", nem.summary())
	foreign := 0
	for _, cl := range clients {
		foreign += cl.foreign
	}
	for _, w := range watchers {
		foreign += w.foreign
	}
	if foreign > 0 {
		t.Logf("%d responses came from a foreign server on a member's port (left out of the history)", foreign)
	}

	members := recoverCluster(ctx, t, c, nem)
	finalReads(ctx, t, members, hist, clusterID, seed, len(clients))
	history := checkWatchers(ctx, t, members, clusterID, watchers)
	verdict := checkHistory(t, hist, history, seed)
	t.Logf("summary: target=%s engine=%s faults=%s duration=%v operations=%d unknown=%d faults-injected=%d (%s) watch-events=%d verdict=%s",
		c.Target(), framework.EngineName(), faultList, duration, verdict.ops, verdict.unknown, nem.injected(), nem.summary(), len(history), verdict.result)
	if verdict.err != nil {
		t.Fatal(verdict.err)
	}
}

// recoverCluster heals the network, restarts every member of the cluster that
// is down, promotes a pending learner, waits until all are ready, and
// returns them.
func recoverCluster(ctx context.Context, t *testing.T, c *framework.Cluster, nem *nemesis) []*framework.Member {
	t.Helper()
	c.Network().HealAll()
	members := nem.members()
	for _, m := range members {
		if !m.Running() {
			if err := m.Start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if nem.ms != nil {
		if err := nem.ms.settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range members {
		if err := m.WaitReady(ctx); err != nil {
			t.Fatalf("cluster did not recover from the nemesis: %v", err)
		}
	}
	return members
}

// finalReads reads every key through every member, retrying failed reads
// (a member may still be catching up), and records them.
func finalReads(ctx context.Context, t *testing.T, members []*framework.Member, hist *history, clusterID, seed uint64, firstID int) {
	t.Helper()
	for i, m := range members {
		cl, err := newClient(firstID+i, m.Endpoint(), clusterID, seed, hist)
		if err != nil {
			t.Fatal(err)
		}
		for k := range keyCount {
			key := fmt.Sprintf("/lin/k%d", k)
			for !cl.get(ctx, key) {
				if ctx.Err() != nil {
					cl.close()
					t.Fatalf("final read of %s on %s: %v", key, m.Name(), ctx.Err())
				}
				sleepCtx(ctx, failureBackoff)
			}
		}
		cl.close()
	}
}

// readClusterID reads the cluster's ID from a response header, for the
// clients and watchers to tell this cluster's answers from a foreign
// server's.
func readClusterID(ctx context.Context, t *testing.T, c *framework.Cluster) uint64 {
	t.Helper()
	resp, err := c.Member(0).NewClient(t).Get(ctx, "/lin/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("read the cluster ID: %v", err)
	}
	if resp.Header.ClusterId == 0 {
		t.Fatal("the response header carries no cluster ID")
	}
	return resp.Header.ClusterId
}

func memberEndpoints(members []*framework.Member) (names, endpoints []string) {
	for _, m := range members {
		names = append(names, m.Name())
		endpoints = append(endpoints, m.Endpoint())
	}
	return names, endpoints
}

// checkWatchers reads the whole event history from every member, checks
// that the members agree on it, and holds every watcher's record against
// it (see watch.go). It returns the history.
func checkWatchers(ctx context.Context, t *testing.T, members []*framework.Member, clusterID uint64, watchers []*watcher) []*mvccpb.Event {
	t.Helper()
	cli := members[0].NewClient(t)
	resp, err := cli.Get(ctx, "/lin/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("read the final revision: %v", err)
	}
	if resp.Header.ClusterId != clusterID {
		t.Fatalf("%s answered the final read for cluster %x, not %x: a foreign server", members[0].Name(), resp.Header.ClusterId, clusterID)
	}
	rev := resp.Header.Revision
	var history []*mvccpb.Event
	for i, m := range members {
		h, err := fullHistory(ctx, m.Endpoint(), clusterID, rev)
		if err != nil {
			t.Fatalf("read the event history from %s: %v", m.Name(), err)
		}
		if i == 0 {
			history = h
			continue
		}
		if len(h) != len(history) {
			t.Fatalf("%s has %d events up to revision %d, %s has %d", m.Name(), len(h), rev, members[0].Name(), len(history))
		}
		for j := range h {
			if !sameEvent(h[j], history[j]) {
				t.Fatalf("event %d: %s has %s, %s has %s", j, m.Name(), describe(h[j]), members[0].Name(), describe(history[j]))
			}
		}
	}
	for _, w := range watchers {
		events, progress := 0, 0
		for _, r := range w.resps {
			events += len(r.events)
			if r.progress {
				progress++
			}
		}
		t.Logf("watcher %d: %d events, %d progress notifications, %d streams, up to revision %d of %d",
			w.id, events, progress, w.resumes, w.next-1, rev)
		for _, err := range checkWatcher(w, history) {
			t.Error(err)
		}
	}
	return history
}
