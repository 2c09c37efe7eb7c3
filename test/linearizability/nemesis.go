package linearizability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
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
	faultReconfigure
	// The disk faults (nemesis_disk.go).
	faultTornWAL
	faultTruncSnap
	faultLostData
	faultDiskFull
	// The faults through the disk-fault seam (nemesis_disk_seam.go),
	// not in "all".
	faultSlowDisk
	faultDiskError
	faultCount
)

// faultNames are the faults' names in -lin.faults (and make
// test-faults-long FAULT=...).
var faultNames = [...]string{"kill", "pause", "isolate", "membership", "tornwal", "truncsnap", "lostdata", "diskfull", "slowdisk", "diskerror"}

func (f fault) String() string { return faultNames[f] }

// parseFaults reads a comma-separated list of fault names ("all" for
// every fault but the seam faults, whose runs would not use the shipped
// binary: see nemesis_disk_seam.go).
func parseFaults(list string) ([]fault, error) {
	if list == "all" {
		var all []fault
		for f := range faultCount {
			if !isSeamFault(f) {
				all = append(all, f)
			}
		}
		return all, nil
	}
	var faults []fault
	for _, name := range strings.Split(list, ",") {
		i := slices.Index(faultNames[:], strings.TrimSpace(name))
		if i < 0 {
			return nil, fmt.Errorf("unknown fault %q (want all or some of %s)", name, strings.Join(faultNames[:], ","))
		}
		faults = append(faults, fault(i))
	}
	return faults, nil
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

// nemesis injures one member at a time, cycling through its fault kinds
// in a random order each round, until its context ends.
type nemesis struct {
	t       *testing.T
	cluster *framework.Cluster
	faults  []fault
	rng     *rand.Rand
	// ms drives faultReconfigure, replaces members for the disk faults
	// and says which slots are in the cluster; nil without those faults
	// (every slot is then a member).
	ms     *membership
	disk   *diskFaults
	seam   *seamFaults
	counts [faultCount]int
}

func newNemesis(t *testing.T, c *framework.Cluster, faults []fault, ms *membership, disk *diskFaults, seed uint64) *nemesis {
	return &nemesis{t: t, cluster: c, faults: faults, ms: ms, disk: disk, seam: newSeamFaults(t, seed), rng: rand.New(rand.NewPCG(seed, 0x6e656d))}
}

// members are the members the nemesis may injure: those in the cluster.
func (n *nemesis) members() []*framework.Member {
	if n.ms == nil {
		return n.cluster.Members()
	}
	return n.ms.members()
}

// run injures and heals until ctx ends, and leaves every member healed
// and running. It returns the first harness error (a member that cannot
// be signalled or restarted), which fails the test.
func (n *nemesis) run(ctx context.Context) error {
	for {
		for _, i := range n.rng.Perm(len(n.faults)) {
			if !sleepCtx(ctx, n.between(calmMin, calmMax)) {
				return nil
			}
			if err := n.inject(ctx, n.faults[i]); err != nil {
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
	n.counts[f]++
	if f == faultReconfigure {
		what, err := n.ms.step(ctx)
		n.t.Logf("nemesis: %s", what)
		return err
	}
	members := n.members()
	m := members[n.rng.IntN(len(members))]
	if f == faultSlowDisk {
		m = n.seam.preferLeader(ctx, members, m)
	}
	hold := n.between(faultMin, faultMax)
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
	case faultSlowDisk, faultDiskError:
		return n.seam.inject(ctx, f, members, m, n.ms != nil && n.ms.learner == m.Name(), hold)
	default:
		return n.disk.inject(ctx, f, m, n.ms, hold)
	}
	return nil
}

// summary says how often each fault was injected.
func (n *nemesis) summary() string {
	s := fmt.Sprintf("%d kills, %d pauses, %d isolations", n.counts[faultKill], n.counts[faultPause], n.counts[faultIsolate])
	if slices.Contains(n.faults, faultReconfigure) {
		s += ", " + n.ms.summary()
	}
	if d := n.disk.summary(n.counts); d != "" {
		s += ", " + d
	}
	if d := n.seam.summary(n.counts); d != "" {
		s += ", " + d
	}
	return s
}

// injected is the number of faults injected.
func (n *nemesis) injected() int {
	total := 0
	for _, c := range n.counts {
		total += c
	}
	return total
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
