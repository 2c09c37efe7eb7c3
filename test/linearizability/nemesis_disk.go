package linearizability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"go.uber.org/zap"

	"github.com/metastore-io/metastore/test/framework"
)

// The disk faults damage what a member keeps on disk, one member at a
// time like the others:
//
//	tornwal    kill -9, leave a torn record after the last complete one
//	           in the newest WAL segment (waltail.go), restart: the member
//	           must drop the torn tail (its log says so) and rejoin
//	truncsnap  kill -9, cut the newest snapshot file (member/snap/*.snap)
//	           short, restart: the member recovers, or refuses to start
//	           naming the file and is then replaced as an operator would
//	           (membership.replace: wipe, member remove, member add, join)
//	lostdata   kill -9, delete the whole data dir, replace the member: it
//	           catches up from the leader by snapshot
//	diskfull   fill the rest of the member's own tmpfs (diskfull.go) for
//	           the hold time: it keeps serving reads and refuses writes,
//	           or stops naming the full disk (then it is restarted once
//	           the space is back)
//
// A member that does not behave so fails the test with what it did; the
// linearizability and watch checks then say whether an acknowledged write
// was lost.

const (
	// diskRecoveryTimeout bounds the wait for a restarted or replaced
	// member to serve again (a replaced one catches up by snapshot).
	diskRecoveryTimeout = 90 * time.Second
	// probeTimeout bounds one request probing a member with a full disk,
	// which gets probeReads attempts at a read.
	probeTimeout = 3 * time.Second
	probeReads   = 3
	// logPoll spaces the reads of a member's log and status while waiting.
	logPoll = 100 * time.Millisecond
)

// Log lines that say a member dropped a torn WAL tail: internal/raftnode/wal's
// warning and etcd's (etcdserver/bootstrap.go).
const (
	metastoreTornTailLog = "truncating torn WAL tail"
	etcdTornTailLog      = "repaired WAL"
	noSpaceLog           = "no space left on device"
)

// isDiskFault says whether f is one of the faults of this file.
func isDiskFault(f fault) bool {
	return f == faultTornWAL || f == faultTruncSnap || f == faultLostData || f == faultDiskFull
}

// diskFaults injects the disk faults. Only the nemesis' goroutine uses it
// once the run started.
type diskFaults struct {
	t      *testing.T
	target framework.Target
	rng    *rand.Rand
	tmpfs  *tmpfsDisks // the diskfull fault's file systems; nil without it

	tornTails     int // torn tails the member said it dropped
	walNone       int // kills before the member had a WAL segment
	snapRecovered int // truncated snapshots the member started on
	snapReplaced  int // ... it refused, so it was replaced
	snapNone      int // kills before the member had a snapshot file
	lostReplaced  int
	fullStopped   int // members that stopped on a full disk
	fullServing   int // ... that kept serving
	fullSkipped   int // diskfull injections without a tmpfs
}

func newDiskFaults(t *testing.T, faults []fault, seed uint64) (*diskFaults, error) {
	target, err := framework.TargetFromEnv()
	if err != nil {
		return nil, err
	}
	d := &diskFaults{t: t, target: target, rng: rand.New(rand.NewPCG(seed, 0x6469736b))}
	if slices.Contains(faults, faultDiskFull) {
		d.tmpfs = newTmpfsDisks(t)
	}
	return d, nil
}

// prepareDataDir is the cluster's ClusterConfig.PrepareDataDir: nil
// unless the diskfull fault runs.
func (d *diskFaults) prepareDataDir() func(name, dir string) error {
	if d.tmpfs == nil {
		return nil
	}
	return d.tmpfs.mount
}

// inject hurts m with the disk fault f; ms (never nil with a disk fault)
// replaces members. hold is how long m stays down or its disk full.
func (d *diskFaults) inject(ctx context.Context, f fault, m *framework.Member, ms *membership, hold time.Duration) error {
	from := logSize(m)
	if err := d.injectOn(ctx, f, m, ms, hold); err != nil {
		// The framework prints the last lines of a failed test's logs,
		// which a member retrying one thing can fill: say what else it
		// complained of since the fault began.
		return fmt.Errorf("%w\n%s's warnings and errors since the fault began:\n%s", err, m.Name(), logDigest(logSince(m, from)))
	}
	return nil
}

func (d *diskFaults) injectOn(ctx context.Context, f fault, m *framework.Member, ms *membership, hold time.Duration) error {
	// Healing goes on when the run ends meanwhile.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diskRecoveryTimeout)
	defer cancel()
	learner := ms.learner == m.Name()
	switch f {
	case faultTornWAL:
		return d.tornWAL(ctx, rctx, m, learner, hold)
	case faultTruncSnap:
		return d.truncSnap(ctx, rctx, m, ms, learner, hold)
	case faultLostData:
		if _, err := m.Kill(); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		if err := ms.replace(rctx, m.Name()); err != nil {
			return fmt.Errorf("replace %s after losing its data dir: %w", m.Name(), err)
		}
		d.lostReplaced++
		return waitUp(rctx, m, learner)
	case faultDiskFull:
		return d.diskFull(rctx, m, learner, hold)
	}
	return fmt.Errorf("%s is no disk fault", f)
}

func (d *diskFaults) tornWAL(ctx, rctx context.Context, m *framework.Member, learner bool, hold time.Duration) error {
	if _, err := m.Kill(); err != nil {
		return err
	}
	what, err := tearWALTail(d.target, m.DataDir(), d.rng)
	if errors.Is(err, errNoWAL) {
		d.t.Logf("nemesis: tornwal %s: no WAL segment yet (it had just joined), restarting it", m.Name())
		d.walNone++
		if err := m.Start(); err != nil {
			return err
		}
		return waitUp(rctx, m, learner)
	}
	if err != nil {
		return fmt.Errorf("tear %s's WAL tail: %w", m.Name(), err)
	}
	d.t.Logf("nemesis: tornwal %s: %s", m.Name(), what)
	sleepCtx(ctx, hold)
	from := logSize(m)
	if err := m.Start(); err != nil {
		return fmt.Errorf("restart %s after tearing its WAL tail: %w", m.Name(), err)
	}
	if err := waitUp(rctx, m, learner); err != nil {
		return fmt.Errorf("%s did not come back from a torn WAL tail (%s): %w", m.Name(), what, err)
	}
	marker := metastoreTornTailLog
	if d.target == framework.TargetEtcd {
		marker = etcdTornTailLog
	}
	if !strings.Contains(logSince(m, from), marker) {
		return fmt.Errorf("%s restarted on a torn WAL tail (%s) without logging %q", m.Name(), what, marker)
	}
	d.tornTails++
	return nil
}

func (d *diskFaults) truncSnap(ctx, rctx context.Context, m *framework.Member, ms *membership, learner bool, hold time.Duration) error {
	if _, err := m.Kill(); err != nil {
		return err
	}
	snaps, err := filepath.Glob(filepath.Join(m.DataDir(), "member", "snap", "*.snap"))
	if err != nil {
		return err
	}
	sleepCtx(ctx, hold)
	from := logSize(m)
	if len(snaps) == 0 {
		d.t.Logf("nemesis: truncsnap %s: no snapshot file yet, restarting it", m.Name())
		d.snapNone++
		if err := m.Start(); err != nil {
			return err
		}
		return waitUp(rctx, m, learner)
	}
	// Names are <term 16hex>-<index 16hex>.snap: the greatest is the newest.
	snap := slices.Max(snaps)
	info, err := os.Stat(snap)
	if err != nil {
		return err
	}
	size := d.rng.Int64N(info.Size())
	if err := os.Truncate(snap, size); err != nil {
		return err
	}
	d.t.Logf("nemesis: truncsnap %s: cut %s from %d to %d bytes", m.Name(), filepath.Base(snap), info.Size(), size)
	if err := m.Start(); err != nil {
		return fmt.Errorf("restart %s after cutting its snapshot: %w", m.Name(), err)
	}
	upErr := waitUp(rctx, m, learner)
	if upErr == nil {
		d.snapRecovered++
		return nil
	}
	if m.Running() {
		return fmt.Errorf("%s neither recovered from a cut snapshot nor refused to start: %w", m.Name(), upErr)
	}
	if !strings.Contains(logSince(m, from), filepath.Base(snap)) {
		return fmt.Errorf("%s refused to start after its snapshot was cut without naming %s: %w", m.Name(), filepath.Base(snap), upErr)
	}
	d.t.Logf("nemesis: truncsnap %s refused to start, naming %s: replacing it", m.Name(), filepath.Base(snap))
	if err := ms.replace(rctx, m.Name()); err != nil {
		return fmt.Errorf("replace %s after its snapshot was cut: %w", m.Name(), err)
	}
	d.snapReplaced++
	return waitUp(rctx, m, learner)
}

// waitUp waits until a (re)started member serves again: a linearizable
// read through a voter succeeds, a learner (which serves none) answers
// Status with a leader. It fails once the member exits.
func waitUp(ctx context.Context, m *framework.Member, learner bool) error {
	if !learner {
		return m.WaitReady(ctx)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Endpoint()}, DialTimeout: framework.DefaultDialTimeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	exited := m.Exited()
	for {
		sctx, cancel := context.WithTimeout(ctx, probeTimeout)
		status, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Status(sctx, &pb.StatusRequest{})
		cancel()
		if err == nil && status.Leader != 0 {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("learner %s exited before serving: last status: %v", m.Name(), err)
		case <-ctx.Done():
			return fmt.Errorf("learner %s does not serve: %w (last status: %v)", m.Name(), ctx.Err(), err)
		case <-time.After(logPoll):
		}
	}
}

// logSize is the length of m's log: what a new run writes comes after.
func logSize(m *framework.Member) int64 {
	info, err := os.Stat(m.LogPath())
	if err != nil {
		return 0
	}
	return info.Size()
}

// logSince is m's log from offset from on ("" if unreadable).
func logSince(m *framework.Member, from int64) string {
	f, err := os.Open(m.LogPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	return string(b)
}

// digestLines bounds logDigest's answer.
const digestLines = 40

// logDigest lists the distinct warning and error messages of a member's
// log text (etcd's and MetaStore's JSON lines: level and msg), in order of
// first appearance, with how often each came.
func logDigest(log string) string {
	var order []string
	counts := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		var entry struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Err   string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil {
			continue
		}
		switch strings.ToLower(entry.Level) {
		case "info", "debug", "":
			continue
		}
		key := entry.Level + " " + entry.Msg
		if entry.Err != "" {
			key += ": " + entry.Err
		}
		if counts[key] == 0 {
			order = append(order, key)
		}
		counts[key]++
	}
	var b strings.Builder
	for i, key := range order {
		if i == digestLines {
			fmt.Fprintf(&b, "  ... %d more\n", len(order)-digestLines)
			break
		}
		fmt.Fprintf(&b, "  %dx %s\n", counts[key], key)
	}
	return b.String()
}

// namesFullDisk says whether log text says a write found the disk full.
func namesFullDisk(log string) bool {
	return bytes.Contains(bytes.ToLower([]byte(log)), []byte(noSpaceLog))
}

// probeFullMember asks a member whose disk is full for a serializable read
// and a write that changes nothing (a transaction whose comparison fails,
// so no revision is spent); it returns a description of the write's
// outcome and the read's error.
func probeFullMember(ctx context.Context, m *framework.Member) (write string, readErr error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Endpoint()}, DialTimeout: framework.DefaultDialTimeout, Logger: zap.NewNop()})
	if err != nil {
		return "no client", err
	}
	defer cli.Close()
	// A loaded machine may let one read time out; a member that stops
	// meanwhile is not asked again.
	for range probeReads {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		_, readErr = cli.Get(pctx, "/lin/k0", clientv3.WithSerializable())
		cancel()
		if readErr == nil || !m.Running() {
			break
		}
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err = cli.Txn(pctx).If(clientv3.Compare(clientv3.Version("/nemesis/diskfull"), "=", 1)).Commit()
	switch {
	case err == nil:
		return "a write went through", readErr
	case errors.Is(err, context.DeadlineExceeded):
		return "a write timed out", readErr
	default:
		return "a write failed: " + err.Error(), readErr
	}
}

func (d *diskFaults) diskFull(rctx context.Context, m *framework.Member, learner bool, hold time.Duration) error {
	if d.tmpfs.skipped != "" {
		d.fullSkipped++
		d.t.Logf("nemesis: diskfull %s skipped: %s", m.Name(), d.tmpfs.skipped)
		return nil
	}
	from := logSize(m)
	filler, err := d.tmpfs.fill(m.DataDir())
	if err != nil {
		return err
	}
	full := time.Now()
	write, readErr := probeFullMember(rctx, m)
	probes := fmt.Sprintf("serializable read %s, %s", errOrOK(readErr), write)
	if !m.Running() {
		// It found the disk full before or while being probed.
		readErr, probes = nil, "stopped before the probes were answered"
	}
	// Hold the disk full, topping the filler up as the member frees space
	// (old snapshots, released segments), until the hold ends or the
	// member stops; the whole hold even when the run ends meanwhile, so
	// a member still running at its end did run on a full disk.
	for wait := time.Until(full.Add(hold)); wait > 0 && m.Running(); wait = time.Until(full.Add(hold)) {
		if !sleepCtx(rctx, min(wait, logPoll)) {
			break
		}
		if err := filler.topUp(); err != nil {
			return errors.Join(err, filler.remove())
		}
	}
	running := m.Running()
	if err := filler.remove(); err != nil {
		return err
	}
	d.t.Logf("nemesis: diskfull %s: filled %d MiB; while full: %s; %s at the end",
		m.Name(), filler.size>>20, probes, map[bool]string{true: "running", false: "stopped"}[running])
	if running {
		// Running still, or the write that found the disk full came
		// late and the member is on its way out.
		upErr := waitUp(rctx, m, learner)
		if upErr == nil {
			if readErr != nil {
				return fmt.Errorf("%s kept running on a full disk but served no read: %w", m.Name(), readErr)
			}
			d.fullServing++
			return nil
		}
		if m.Running() {
			return fmt.Errorf("%s does not serve once its disk has space again: %w", m.Name(), upErr)
		}
	}
	if !namesFullDisk(logSince(m, from)) {
		return fmt.Errorf("%s stopped on a full disk without saying %q in its log", m.Name(), noSpaceLog)
	}
	d.fullStopped++
	if err := m.Start(); err != nil {
		return fmt.Errorf("restart %s once its disk has space again: %w", m.Name(), err)
	}
	if err := waitUp(rctx, m, learner); err != nil {
		return fmt.Errorf("%s does not serve after a restart once its disk has space again: %w", m.Name(), err)
	}
	return nil
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// summary says what the disk faults found.
func (d *diskFaults) summary(counts [faultCount]int) string {
	var parts []string
	if n := counts[faultTornWAL]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d torn WAL tails (%d dropped, %d before any WAL)", n, d.tornTails, d.walNone))
	}
	if n := counts[faultTruncSnap]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d cut snapshots (%d recovered, %d refused and replaced, %d before any snapshot)", n, d.snapRecovered, d.snapReplaced, d.snapNone))
	}
	if n := counts[faultLostData]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d lost data dirs (%d replaced)", n, d.lostReplaced))
	}
	if n := counts[faultDiskFull]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d full disks (%d stopped, %d kept serving, %d skipped)", n, d.fullStopped, d.fullServing, d.fullSkipped))
	}
	return strings.Join(parts, ", ")
}
