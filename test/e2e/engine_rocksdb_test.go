package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// rocksdbFlags selects MetaStore's RocksDB engine. These tests run it
// whatever E2E_EXTRA_FLAGS says (the whole suite runs on it with
// E2E_EXTRA_FLAGS=--storage-engine=rocksdb); etcd has no such engine.
var rocksdbFlags = []string{"--storage-engine=rocksdb"}

func requireMetaStore(t *testing.T) {
	t.Helper()
	framework.SkipUnlessMetaStore(t, "the RocksDB engine")
	if strings.Contains(os.Getenv(framework.ExtraFlagsEnvVar), "--storage-engine") {
		// The variable's flags come after ours and would win.
		t.Skipf("%s chooses the storage engine", framework.ExtraFlagsEnvVar)
	}
}

func TestRocksDBKill9KeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	requireMetaStore(t)
	testCrashRecovery(t, framework.ClusterConfig{ExtraFlags: rocksdbFlags}, 500)
}

// crashTwice is testCrashRecovery on a server the caller started (and
// can inspect afterwards): two rounds of streaming puts, kill -9
// mid-stream, restart, and check every acknowledged put.
func crashTwice(t *testing.T, s *server, acksPerRound int) {
	ctx := testContext(t, durabilityTimeout)
	member := s.member()
	var rounds []*ackLog
	for round := range 2 {
		acks := streamUntilInterrupted(ctx, t, s.cli, roundPrefix(round), acksPerRound, func() {
			if status, err := member.Kill(); err != nil {
				t.Errorf("kill -9: %v", err)
			} else if status.Signal != syscall.SIGKILL {
				t.Errorf("kill -9: process ended with %s", status)
			}
		})
		if err := member.Restart(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		rounds = append(rounds, acks)
		for r, acks := range rounds {
			requireAcked(ctx, t, s.cli, roundPrefix(r), acks)
		}
	}
}

// With --snapshot-count=100 a round of 3000 writes passes some 30
// snapshot points before the crash. On RocksDB each is persisted in place
// (the engine fsyncs its log and the snapshot file holds only a marker),
// and the raft WAL is released behind it: recovery must come from the
// engine's own files plus the WAL tail, with no image to fall back on.
func TestRocksDBKill9KeepsAcknowledgedWritesAcrossInPlaceSnapshots(t *testing.T) {
	t.Parallel()
	requireMetaStore(t)
	cfg := framework.ClusterConfig{SnapshotCount: 100, ExtraFlags: rocksdbFlags}
	s := startServer(t, cfg)
	crashTwice(t, s, 3000)

	// No snapshot file holds a copy of the data: every one is a marker
	// (a full image of 6000 keys would be hundreds of KiB).
	snapDir := filepath.Join(s.member().DataDir(), "member", "snap")
	des, err := os.ReadDir(snapDir)
	if err != nil {
		t.Fatal(err)
	}
	snaps := 0
	for _, de := range des {
		if filepath.Ext(de.Name()) != ".snap" {
			continue
		}
		snaps++
		info, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > 1024 {
			t.Errorf("snapshot %s holds %d bytes: a full image, where RocksDB persists snapshots in place", de.Name(), info.Size())
		}
	}
	if snaps == 0 {
		t.Fatalf("no snapshot files in %s after 6000 writes with --snapshot-count=100", snapDir)
	}
}

// Compacting drops old revisions from RocksDB and Defragment (a manual
// RocksDB compaction) gives their space back: Status reports the real
// sizes before and after, and the surviving data is intact after a
// restart.
func TestRocksDBCompactionAndDefragmentReclaimSpace(t *testing.T) {
	t.Parallel()
	requireMetaStore(t)
	s := startServer(t, framework.ClusterConfig{ExtraFlags: rocksdbFlags})
	ctx := testContext(t, testTimeout)
	maint := pb.NewMaintenanceClient(s.cli.ActiveConnection())
	status := func() *pb.StatusResponse {
		t.Helper()
		st, err := maint.Status(ctx, &pb.StatusRequest{})
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		return st
	}

	// 20 keys rewritten 100 times with 4 KiB values: 8 MiB of history,
	// 80 KiB of which stays live. Random bytes, so that compression
	// does not make the sizes meaningless.
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 4096)
	for round := range 100 {
		for k := range 20 {
			for i := range value {
				value[i] = byte(rng.Uint32())
			}
			mustPut(ctx, t, s.cli, fmt.Sprintf("key-%02d", k), fmt.Sprintf("%03d%s", round, value))
		}
	}
	before := status()
	if before.DbSize < 4<<20 {
		t.Fatalf("db_size %d after writing 8 MiB of history, want at least 4 MiB", before.DbSize)
	}
	rev := currentRevision(ctx, t, s.cli)
	// Physical: answered once the old revisions are deleted (they go in
	// batches of --compaction-batch-limit after the compaction applies,
	// as etcd deletes them in the background).
	if _, err := s.cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact at %d: %v", rev, err)
	}
	if _, err := maint.Defragment(ctx, &pb.DefragmentRequest{}); err != nil {
		t.Fatalf("defragment: %v", err)
	}
	after := status()
	t.Logf("db_size %d -> %d, db_size_in_use %d -> %d", before.DbSize, after.DbSize, before.DbSizeInUse, after.DbSizeInUse)
	if after.DbSize > before.DbSize/4 || after.DbSizeInUse > after.DbSize {
		t.Fatalf("after compaction and defragment: db_size %d (was %d), db_size_in_use %d; want the history's space back",
			after.DbSize, before.DbSize, after.DbSizeInUse)
	}

	if _, err := s.member().Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	if err := s.member().Restart(ctx); err != nil {
		t.Fatal(err)
	}
	resp := mustGet(ctx, t, s.cli, "key-", clientv3.WithPrefix())
	if len(resp.Kvs) != 20 {
		t.Fatalf("%d keys after restart, want 20", len(resp.Kvs))
	}
	for _, kv := range resp.Kvs {
		if !strings.HasPrefix(string(kv.Value), "099") || kv.Version != 100 {
			t.Fatalf("%s: value %.3q... version %d, want the 100th write", kv.Key, kv.Value, kv.Version)
		}
	}
	if _, err := s.cli.Get(ctx, "key-00", clientv3.WithRev(rev-1)); err == nil {
		t.Fatalf("read at revision %d, below the compaction at %d, succeeded after restart", rev-1, rev)
	}
}

// A follower cut off while the leader writes past several in-place
// snapshots (and compacts its log behind them) can only catch up from a
// full image: the leader must write one on demand, stream it, and the
// follower must install it into its own RocksDB, then restart from it.
func TestRocksDBLaggingFollowerCatchesUpFromFullImage(t *testing.T) {
	t.Parallel()
	requireMetaStore(t)
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, PeerProxies: true, SnapshotCount: 100, ExtraFlags: rocksdbFlags})
	mc := newMemberClients(t, c)
	all := c.Members()
	leader := mc.waitLeader(ctx, t, all)
	lagging := others(all, leader)[0]

	c.Network().Isolate(lagging.Name())
	const writes = 600 // six snapshots; the log keeps only 50 entries behind each
	for i := range writes {
		mustPut(ctx, t, mc.of(t, leader), fmt.Sprintf("/lag/%04d", i), fmt.Sprint(i))
	}
	c.Network().Heal(lagging.Name())

	caughtUp := func() bool {
		rctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		resp, err := mc.of(t, lagging).Get(rctx, "/lag/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == writes
	}
	for !caughtUp() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not catch up with %d writes", lagging.Name(), writes)
		case <-time.After(pollInterval):
		}
	}
	waitForLog(ctx, t, leader, `"in_engine":false`)
	waitForLog(ctx, t, lagging, "installed snapshot from leader")
	rev := currentRevision(ctx, t, mc.of(t, leader))
	mc.requireSameHashKV(ctx, t, all, rev)

	// The installed image is the follower's engine content now: it
	// restarts from it, with no image to load.
	if _, err := lagging.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	if err := lagging.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := mc.of(t, lagging).Get(ctx, "/lag/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != writes {
		t.Fatalf("after restart %s holds %v keys (err %v), want %d", lagging.Name(), resp, err, writes)
	}
	mc.requireSameHashKV(ctx, t, all, rev)
}
