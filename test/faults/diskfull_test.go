package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// diskSize is the tmpfs a member starts on: room for etcd's two 64 MiB
	// preallocated WAL segments (the current one and the next, which its
	// file pipeline allocates ahead) and a few dozen values more.
	diskSize = "200m"
	// diskSizeAfter is the size it is grown to once the disk is full.
	diskSizeAfter = "1g"
	// fillValueSize values fill the disk in about a hundred puts; random
	// bytes, so RocksDB's compression cannot shrink them.
	fillValueSize = 1 << 20
	// maxFillPuts bounds the fill; the disk is full well before.
	maxFillPuts = 400
	// failuresToStop consecutive failed puts end the fill.
	failuresToStop = 3
	putTimeout     = 5 * time.Second
)

// mountTmpfs mounts a tmpfs of size at dir, or skips the test when that
// is not allowed here (not root, or no mount permission).
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", dir, err, out)
		}
	})
}

func resizeTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs at %s: %v: %s", dir, err, out)
	}
}

// TestDiskFullKeepsAcknowledgedWrites fills a member's disk with puts.
// Once full, the member either refuses writes and keeps serving reads, or
// stops with a message that names the full disk; either way, once space
// returns (and the member is restarted if it stopped) every acknowledged
// put is there and new writes succeed.
func TestDiskFullKeepsAcknowledgedWrites(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs under the member's data dir")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	var dataDir string
	c := framework.NewCluster(t, framework.ClusterConfig{
		// Small snapshots now and then, so the fill also hits the
		// snapshot files, not only the log.
		SnapshotCount: 40,
		PrepareDataDir: func(_, dir string) error {
			dataDir = dir
			mountTmpfs(t, dir, diskSize)
			return nil
		},
	})
	m := c.Member(0)
	cli := m.NewClient(t)

	acked := map[string][32]byte{}
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, fillValueSize)
	failures, lastErr := 0, error(nil)
	for i := 0; i < maxFillPuts && failures < failuresToStop; i++ {
		for j := range value {
			value[j] = byte(rng.Uint32())
		}
		key := fmt.Sprintf("/fill/%04d", i)
		pctx, pcancel := context.WithTimeout(ctx, putTimeout)
		_, err := cli.Put(pctx, key, string(value))
		pcancel()
		if err != nil {
			failures++
			lastErr = err
			continue
		}
		failures = 0
		acked[key] = sha256.Sum256(value)
	}
	if failures < failuresToStop {
		t.Fatalf("%d puts of %d bytes never filled a %s disk", maxFillPuts, fillValueSize, diskSize)
	}
	t.Logf("disk full after %d acknowledged puts; last error: %v", len(acked), lastErr)

	// The member either keeps serving reads (refusing writes) or stops:
	// a member that no longer answers reads must be on its way out.
	gctx, gcancel := context.WithTimeout(ctx, putTimeout)
	_, err := cli.Get(gctx, "/fill/0000", clientv3.WithSerializable())
	gcancel()
	if err == nil {
		pctx, pcancel := context.WithTimeout(ctx, putTimeout)
		_, err := cli.Put(pctx, "/fill/one-more", string(value))
		pcancel()
		if err == nil {
			t.Fatal("a full disk took one more 1 MiB put")
		}
	} else {
		select {
		case <-m.Exited():
		case <-ctx.Done():
			t.Fatalf("the member neither serves reads (%v) nor stops", err)
		}
		log, err := os.ReadFile(m.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(bytes.ToLower(log), []byte("no space left on device")) {
			t.Errorf("the member stopped without naming the full disk in its log")
		}
	}

	resizeTmpfs(t, dataDir, diskSizeAfter)
	// Writes succeed again (at once after a restart; a member that kept
	// running may retry its own pending work first).
	for {
		if !m.Running() {
			if err := m.Restart(ctx); err != nil {
				t.Fatalf("restart once space returned: %v", err)
			}
		}
		pctx, pcancel := context.WithTimeout(ctx, putTimeout)
		_, err := cli.Put(pctx, "/fill/after", "space is back")
		pcancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("writes did not resume once space returned: %v", err)
		case <-time.After(100 * time.Millisecond): // retry back-off
		}
	}
	resp, err := cli.Get(ctx, "/fill/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][32]byte{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = sha256.Sum256(kv.Value)
	}
	for key, sum := range acked {
		if g, ok := got[key]; !ok {
			t.Errorf("acknowledged %s is gone", key)
		} else if g != sum {
			t.Errorf("acknowledged %s has another value", key)
		}
	}
}
