package e2e

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// TestAutoCompactionPeriodic runs a member with
// --auto-compaction-mode=periodic --auto-compaction-retention=2s: etcd's
// periodic compactor samples the revision every 200ms and compacts to the
// revision of about 2s before, every 2s, so history written now becomes
// unreadable within a few seconds while the latest values stay. (Revision
// mode runs every 5 minutes with no knob, in etcd as here; its schedule is
// tested with a fake clock in internal/kvstore/compactor.)
func TestAutoCompactionPeriodic(t *testing.T) {
	s := startServer(t, framework.ClusterConfig{ExtraFlags: []string{
		"--auto-compaction-mode=periodic", "--auto-compaction-retention=2s",
	}})
	ctx := testContext(t, testTimeout)
	var last *clientv3.PutResponse
	for range 5 {
		last = mustPut(ctx, t, s.cli, "/autocompact/k", "v")
	}
	old := last.Header.Revision - 1
	if _, err := s.cli.Get(ctx, "/autocompact/k", clientv3.WithRev(old)); err != nil {
		t.Fatalf("read at revision %d before any compaction: %v", old, err)
	}
	// Compaction at a revision >= old needs the sample taken after the
	// puts to age 2s, then a compaction tick: some 4s. Allow for load.
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := s.cli.Get(ctx, "/autocompact/k", clientv3.WithRev(old))
		if errors.Is(err, rpctypes.ErrCompacted) {
			break
		}
		if err != nil {
			t.Fatalf("read at revision %d: %v", old, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision %d still readable 30s later: no auto-compaction", old)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	got := mustGet(ctx, t, s.cli, "/autocompact/k")
	if len(got.Kvs) != 1 || got.Kvs[0].ModRevision != last.Header.Revision {
		t.Fatalf("latest value after auto-compaction: %v", got.Kvs)
	}
}
