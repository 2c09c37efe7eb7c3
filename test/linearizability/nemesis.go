package linearizability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// fault is one kind of injury the nemesis inflicts on a member.
type fault int

const (
	faultKill fault = iota
	faultPause
	faultIsolate
	faultCount
)

func (f fault) String() string {
	return [...]string{"kill -9", "SIGSTOP", "isolate"}[f]
}

const (
	// faultMin and faultMax bound how long a member stays injured: from
	// under one election timeout to several.
	faultMin = 500 * time.Millisecond
	faultMax = 4 * time.Second
	// calmMin and calmMax bound the pause between two faults.
	calmMin = 500 * time.Millisecond
	calmMax = 2 * time.Second
)

// nemesis injures one member at a time, cycling through every fault kind
// in a random order each round, until its context ends.
type nemesis struct {
	t       *testing.T
	cluster *framework.Cluster
	rng     *rand.Rand
	counts  [faultCount]int
}

func newNemesis(t *testing.T, c *framework.Cluster, seed uint64) *nemesis {
	return &nemesis{t: t, cluster: c, rng: rand.New(rand.NewPCG(seed, 0x6e656d))}
}

// run injures and heals until ctx ends, and leaves every member healed
// and running. It returns the first harness error (a member that cannot
// be signalled or restarted), which fails the test.
func (n *nemesis) run(ctx context.Context) error {
	for {
		for _, f := range n.rng.Perm(int(faultCount)) {
			if !sleepCtx(ctx, n.between(calmMin, calmMax)) {
				return nil
			}
			if err := n.inject(ctx, fault(f)); err != nil {
				return err
			}
		}
	}
}

func (n *nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)))
}

// inject hurts a random member with f, waits, and heals it. The healing
// happens even when ctx ends meanwhile.
func (n *nemesis) inject(ctx context.Context, f fault) error {
	members := n.cluster.Members()
	m := members[n.rng.IntN(len(members))]
	hold := n.between(faultMin, faultMax)
	n.counts[f]++
	n.t.Logf("nemesis: %s %s for %v", f, m.Name(), hold.Round(time.Millisecond))
	switch f {
	case faultKill:
		if _, err := m.Kill(); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		if err := m.Start(); err != nil {
			return fmt.Errorf("restart %s after kill -9: %w", m.Name(), err)
		}
	case faultPause:
		if err := m.Pause(); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		if err := m.Resume(); err != nil {
			return err
		}
	case faultIsolate:
		n.cluster.Network().Isolate(m.Name())
		sleepCtx(ctx, hold)
		n.cluster.Network().Heal(m.Name())
	}
	return nil
}

// summary says how often each fault was injected.
func (n *nemesis) summary() string {
	return fmt.Sprintf("%d kills, %d pauses, %d isolations", n.counts[faultKill], n.counts[faultPause], n.counts[faultIsolate])
}

// sleepCtx waits d, or less if ctx ends first (false then). The nemesis
// paces faults in wall-clock time: these waits are the experiment, not a
// synchronisation.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
