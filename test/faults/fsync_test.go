package faults

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// faultBinary is MetaStore built with the disk-fault seam
// (internal/faults/diskfault; make build-faults).
const faultBinary = "bin/metastore-faults"

// requireFaultBinary skips against etcd (the seam is MetaStore's; etcd's
// counterpart, gofail failpoints, is not built here) and fails when the
// fault build is missing.
func requireFaultBinary(t *testing.T) {
	t.Helper()
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if target != framework.TargetMetaStore {
		t.Skip("the disk-fault seam is built into MetaStore only")
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.RequireBinary(filepath.Join(root, faultBinary), "make build-faults"); err != nil {
		t.Fatal(err)
	}
}

// TestFailedFsyncStopsTheMember lets a member's fsyncs fail after a while
// under a put load. The member must stop, naming the failed fsync, and
// never acknowledge a put whose log entry it could not make durable;
// restarted with a healthy disk, it holds every acknowledged put.
func TestFailedFsyncStopsTheMember(t *testing.T) {
	requireFaultBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := framework.NewCluster(t, framework.ClusterConfig{Binary: faultBinary})
	m := c.Member(0)
	if _, err := m.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	m.SetEnv([]string{"METASTORE_DISKFAULT=fsync-error-after=150"})
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}

	cli := m.NewClient(t)
	wctx, stopWrites := context.WithCancel(ctx)
	done := make(chan *acks)
	go func() { done <- writeUntil(wctx, cli, "/fsync/") }()
	select {
	case <-m.Exited():
	case <-ctx.Done():
		t.Fatal("the member kept running after its fsyncs began to fail")
	}
	stopWrites()
	a := <-done
	log, err := os.ReadFile(m.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte("injected fault after 150 syncs")) {
		t.Errorf("the member stopped without naming the failed fsync")
	}
	t.Logf("the member stopped after %d acknowledged puts", len(a.puts))

	m.SetEnv(nil)
	if err := m.Restart(ctx); err != nil {
		t.Fatalf("restart on a healthy disk: %v", err)
	}
	requireAcked(ctx, t, cli, "/fsync/", a)
	if _, err := cli.Put(ctx, "/fsync-after", "x"); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
}

// TestSlowFsyncOnOneMember makes one member's fsyncs take 500 ms: the
// cluster keeps acknowledging writes at the pace of the healthy quorum,
// and the slow member stays in the cluster and catches up.
func TestSlowFsyncOnOneMember(t *testing.T) {
	requireFaultBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, Binary: faultBinary})
	slow := c.Member(2)
	if _, err := slow.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	slow.SetEnv([]string{"METASTORE_DISKFAULT=fsync-delay=500ms"})
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	cli := c.Member(0).NewClient(t)
	const puts = 100
	start := time.Now()
	for i := range puts {
		if _, err := cli.Put(ctx, "/slow/"+string(rune('a'+i%26)), "x"); err != nil {
			t.Fatalf("put %d with a slow follower: %v", i, err)
		}
	}
	// 100 sequential puts at the slow member's pace would take 50 s or
	// more; the healthy quorum does not wait for it. The bound only tells
	// the two apart, with room for a loaded machine.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("%d puts took %v: the cluster waited for the slow member", puts, took)
	}
	resp, err := cli.Put(ctx, "/slow-final", "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.WaitReady(ctx); err != nil {
		t.Fatalf("the slow member: %v", err)
	}
	scli := slow.NewClient(t)
	got, err := scli.Get(ctx, "/slow-final") // linearizable: catches up first
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.Revision < resp.Header.Revision {
		t.Errorf("the slow member answered at revision %d, before the last put at %d", got.Header.Revision, resp.Header.Revision)
	}
	// The fault was there: the slow member's WAL fsyncs took their 500 ms.
	sum, count := walFsyncSeconds(ctx, t, slow)
	if count == 0 || sum/count < 0.45 {
		t.Errorf("the slow member's WAL fsyncs took %.3f s on average over %v; the fault was not injected", sum/count, count)
	}
}

// walFsyncSeconds reads etcd_disk_wal_fsync_duration_seconds' sum and
// count from m's /metrics.
func walFsyncSeconds(ctx context.Context, t *testing.T, m *framework.Member) (sum, count float64) {
	t.Helper()
	const name = "etcd_disk_wal_fsync_duration_seconds"
	got := m.MetricSeries(ctx, t, name+"_sum", name+"_count")
	return got[name+"_sum"], got[name+"_count"]
}
