package linearizability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/test/framework"
)

// The seam faults act inside a member's disk through MetaStore's
// disk-fault seam (internal/faults/diskfault), so they need the fault build,
// bin/metastore-faults; the cluster is then started with it and each
// member's plan switched at runtime (framework.Member.SetDiskFault):
//
//	slowdisk   every fsync of one member waits 50-500 ms, or in one
//	           injection of four 1.5-3 s (over the election timeout), for
//	           the hold time; half the time the member is the leader,
//	           which then, as etcd's, sends no heartbeats while its raft
//	           loop waits in the WAL's fsync and loses leadership to a
//	           healthy member. The member must keep running; healed, it
//	           catches up.
//	diskerror  one member's fsyncs (fsync-error) or writes (write-error)
//	           fail with EIO: it must stop on its own within
//	           diskErrorExitWait, its log naming the injected failure;
//	           the nemesis heals its disk and restarts it after the hold.
//
// etcd has no such seam: against it these faults are left out, with a
// log line.

const (
	// diskFaultBinary is MetaStore with the disk-fault seam (make
	// build-faults).
	diskFaultBinary = "bin/metastore-faults"
	// diskErrorExitWait bounds how long a member whose disk fails may go
	// on running: it stops at its next WAL write, and clients write all
	// the time.
	diskErrorExitWait = 30 * time.Second
	// longStallMin is where slowdisk's long stalls start: over the
	// election timeout (both servers' default, 1 s).
	longStallMin = 1500 * time.Millisecond
)

// isSeamFault says whether f needs the disk-fault seam.
func isSeamFault(f fault) bool { return f == faultSlowDisk || f == faultDiskError }

// useDiskSeam prepares cfg for the seam faults among faults: against
// MetaStore the cluster runs bin/metastore-faults with a plan file per
// member; against another target they are left out. It returns the
// faults that run.
func useDiskSeam(t *testing.T, faults []fault, cfg *framework.ClusterConfig) []fault {
	if !slices.ContainsFunc(faults, isSeamFault) {
		return faults
	}
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if target != framework.TargetMetaStore {
		t.Logf("%s has no disk-fault seam (it is MetaStore's fault build): slowdisk and diskerror are left out", target)
		return slices.DeleteFunc(slices.Clone(faults), isSeamFault)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.RequireBinary(root+"/"+diskFaultBinary, "make build-faults"); err != nil {
		t.Fatal(err)
	}
	cfg.Binary, cfg.DiskFaults = diskFaultBinary, true
	return faults
}

// seamFaults injects slowdisk and diskerror. Only the nemesis' goroutine
// uses it.
type seamFaults struct {
	t   *testing.T
	rng *rand.Rand

	leaderSlowed int // slowdisk injections on the leader
	longStalls   int // ... of them over the election timeout
	leaderMoved  int // ... after which another member led
	stopped      int // diskerror injections after which the member stopped naming the failure
}

func newSeamFaults(t *testing.T, seed uint64) *seamFaults {
	return &seamFaults{t: t, rng: rand.New(rand.NewPCG(seed, 0x7365616d))}
}

// preferLeader returns the leader among members half the time (when one
// is found), picked otherwise.
func (s *seamFaults) preferLeader(ctx context.Context, members []*framework.Member, picked *framework.Member) *framework.Member {
	if s.rng.IntN(2) == 0 {
		return picked
	}
	if lead := leaderAmong(ctx, members); lead != nil {
		return lead
	}
	return picked
}

// inject hurts m with f for hold; learner says m is the cluster's learner
// (which serves no linearizable read).
func (s *seamFaults) inject(ctx context.Context, f fault, members []*framework.Member, m *framework.Member, learner bool, hold time.Duration) error {
	// Healing goes on when the run ends meanwhile.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diskRecoveryTimeout)
	defer cancel()
	if f == faultSlowDisk {
		return s.slowDisk(ctx, rctx, members, m, hold)
	}
	return s.diskError(ctx, rctx, m, learner, hold)
}

func (s *seamFaults) slowDisk(ctx, rctx context.Context, members []*framework.Member, m *framework.Member, hold time.Duration) error {
	delay := 50*time.Millisecond + time.Duration(s.rng.Int64N(int64(450*time.Millisecond)))
	long := s.rng.IntN(4) == 0
	if long {
		delay = longStallMin + time.Duration(s.rng.Int64N(int64(longStallMin)))
		hold = max(hold, 4*delay) // room for an election
	}
	wasLeader := leaderAmong(ctx, []*framework.Member{m}) == m
	s.t.Logf("nemesis: slowdisk %s (leader: %v): fsync-delay=%v for %v", m.Name(), wasLeader, delay.Round(time.Millisecond), hold.Round(time.Millisecond))
	if err := m.SetDiskFault(rctx, fmt.Sprintf("fsync-delay=%v", delay.Round(time.Millisecond))); err != nil {
		return err
	}
	sleepCtx(ctx, hold)
	var others []*framework.Member
	for _, o := range members {
		if o != m {
			others = append(others, o)
		}
	}
	// Asked before healing: the stalled member's own word may be stale.
	newLeader := leaderAmong(rctx, others)
	if err := m.SetDiskFault(rctx, ""); err != nil {
		return err
	}
	if !m.Running() {
		return fmt.Errorf("%s stopped on a slow disk (fsync-delay=%v)", m.Name(), delay)
	}
	if wasLeader {
		s.leaderSlowed++
		if long {
			s.longStalls++
		}
		if newLeader != nil {
			s.leaderMoved++
			s.t.Logf("nemesis: slowdisk %s: %s leads now", m.Name(), newLeader.Name())
		}
	}
	return nil
}

func (s *seamFaults) diskError(ctx, rctx context.Context, m *framework.Member, learner bool, hold time.Duration) error {
	spec := []string{"fsync-error", "write-error"}[s.rng.IntN(2)]
	s.t.Logf("nemesis: diskerror %s: %s, down for %v", m.Name(), spec, hold.Round(time.Millisecond))
	from := logSize(m)
	if err := m.SetDiskFault(rctx, spec); err != nil {
		return err
	}
	wait := time.NewTimer(diskErrorExitWait)
	defer wait.Stop()
	select {
	case <-m.Exited():
	case <-wait.C:
		return fmt.Errorf("%s kept running for %v with %s", m.Name(), diskErrorExitWait, spec)
	case <-rctx.Done():
		return fmt.Errorf("%s with %s: %w", m.Name(), spec, rctx.Err())
	}
	log := logSince(m, from)
	want := "injected fault (" + spec + ")"
	if !strings.Contains(log, want) || !strings.Contains(log, "/member/") {
		return fmt.Errorf("%s stopped with %s without naming the file and %q in its log", m.Name(), spec, want)
	}
	s.stopped++
	if err := m.SetDiskFault(rctx, ""); err != nil {
		return err
	}
	sleepCtx(ctx, hold)
	if err := m.Start(); err != nil {
		return fmt.Errorf("restart %s on a healed disk: %w", m.Name(), err)
	}
	if err := waitUp(rctx, m, learner); err != nil {
		return fmt.Errorf("%s does not serve after a restart on a healed disk: %w", m.Name(), err)
	}
	return nil
}

// summary says what the seam faults found.
func (s *seamFaults) summary(counts [faultCount]int) string {
	var parts []string
	if n := counts[faultSlowDisk]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d slow disks (%d on the leader, %d of them over the election timeout; another member led after %d)",
			n, s.leaderSlowed, s.longStalls, s.leaderMoved))
	}
	if n := counts[faultDiskError]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d disk errors (%d stopped naming it)", n, s.stopped))
	}
	return strings.Join(parts, ", ")
}

// leaderAmong asks each running member of members whether it leads and
// returns the first that says so, nil if none does.
func leaderAmong(ctx context.Context, members []*framework.Member) *framework.Member {
	for _, m := range members {
		if !m.Running() {
			continue
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Endpoint()}, DialTimeout: probeTimeout, Logger: zap.NewNop()})
		if err != nil {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, probeTimeout)
		resp, err := cli.Status(sctx, m.Endpoint())
		cancel()
		cli.Close()
		if err == nil && resp.Leader != 0 && resp.Leader == resp.Header.MemberId {
			return m
		}
	}
	return nil
}
