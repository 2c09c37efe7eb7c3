package linearizability

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/metastore-io/metastore/test/framework"
)

var (
	duration = flag.Duration("lin.duration", 60*time.Second, "how long clients run under the nemesis")
	seedFlag = flag.Uint64("lin.seed", 0, "seed of the clients' and the nemesis' choices (0: from the clock)")
)

const (
	// clientsPerMember clients are bound to each member.
	clientsPerMember = 2
	// recoveryTimeout bounds start-up, the final recovery and the final
	// reads, on top of -lin.duration.
	recoveryTimeout = 3 * time.Minute
	// checkTimeout bounds the linearizability check itself.
	checkTimeout = 5 * time.Minute
	// snapshotCount makes members snapshot often, so restarted members
	// catch up by snapshot under the nemesis too.
	snapshotCount = 500
)

func TestLinearizability(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -lin.seed=%d), duration %v", seed, seed, *duration)
	ctx, cancel := context.WithTimeout(t.Context(), *duration+recoveryTimeout)
	defer cancel()
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, PeerProxies: true, SnapshotCount: snapshotCount})

	hist := newHistory()
	var clients []*client
	for i, m := range c.Members() {
		for j := range clientsPerMember {
			cl, err := newClient(i*clientsPerMember+j, m.Endpoint(), seed, hist)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.close()
			clients = append(clients, cl)
		}
	}

	runCtx, stopRun := context.WithTimeout(ctx, *duration)
	defer stopRun()
	nem := newNemesis(t, c, seed)
	nemErr := make(chan error, 1)
	go func() { nemErr <- nem.run(runCtx) }()
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() { cl.run(runCtx) })
	}
	wg.Wait()
	if err := <-nemErr; err != nil {
		t.Fatalf("nemesis: %v", err)
	}
	t.Logf("nemesis: %s", nem.summary())

	// Heal everything and read every key through every member.
	c.Network().HealAll()
	for _, m := range c.Members() {
		if !m.Running() {
			if err := m.Start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("cluster did not recover from the nemesis: %v", err)
	}
	finalReads(ctx, t, c, hist, seed, len(clients))

	ops := hist.operations()
	unknown := 0
	for _, op := range ops {
		if op.Output.(output).unknown {
			unknown++
		}
	}
	t.Logf("checking %d operations (%d with unknown outcome)", len(ops), unknown)
	res, info := porcupine.CheckOperationsVerbose(registerModel, ops, checkTimeout)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), fmt.Sprintf("linearizability-%d.html", seed))
		if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
			t.Errorf("write visualisation: %v", err)
		}
		t.Fatalf("history is not linearizable; see %s", path)
	default:
		t.Fatalf("the checker could not decide within %v", checkTimeout)
	}
}

// finalReads reads every key through every member, retrying failed reads
// (a member may still be catching up), and records them.
func finalReads(ctx context.Context, t *testing.T, c *framework.Cluster, hist *history, seed uint64, firstID int) {
	t.Helper()
	for i, m := range c.Members() {
		cl, err := newClient(firstID+i, m.Endpoint(), seed, hist)
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
