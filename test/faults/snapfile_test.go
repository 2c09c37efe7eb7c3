package faults

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// newestSnapFile is the most recently written *.snap file under dir.
func newestSnapFile(t *testing.T, dir string) string {
	t.Helper()
	var newest string
	var newestTime time.Time
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".snap") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.ModTime().After(newestTime) {
			newest, newestTime = path, info.ModTime()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return newest
}

// TestTruncatedSnapshotFile cuts a follower's newest snapshot file in half
// while it is down. On restart the member either recovers (from an older
// snapshot, its log or its peers) and holds every acknowledged write, or
// refuses to start with a message that names the damaged file; it never
// starts on wrong data.
func TestTruncatedSnapshotFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, SnapshotCount: 100})
	victim := c.Member(2)

	wctx, stopWrites := context.WithCancel(ctx)
	done := make(chan *acks)
	go func() { done <- writeUntil(wctx, c.Member(0).NewClient(t), "/snapcut/") }()
	// Enough writes for several snapshots on every member.
	vcli := victim.NewClient(t)
	for {
		resp, err := vcli.Get(ctx, "/snapcut/", withCount()...)
		if err == nil && resp.Count >= 600 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the writer did not get 600 puts through: %v", err)
		case <-time.After(100 * time.Millisecond): // poll back-off
		}
	}
	if _, err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	stopWrites()
	a := <-done

	snap := newestSnapFile(t, victim.DataDir())
	if snap == "" {
		t.Fatalf("%s has no *.snap file after %d puts with --snapshot-count=100", victim.Name(), len(a.puts))
	}
	info, err := os.Stat(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(snap, info.Size()/2); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut %s from %d to %d bytes", snap, info.Size(), info.Size()/2)

	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() { ready <- victim.WaitReady(ctx) }()
	select {
	case err := <-ready:
		if err == nil {
			requireAcked(ctx, t, vcli, "/snapcut/", a)
			t.Logf("%s recovered with all %d acknowledged puts", victim.Name(), len(a.puts))
			return
		}
		<-victim.Exited()
	case <-victim.Exited():
	}
	log, err := os.ReadFile(victim.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(log, []byte(filepath.Base(snap))) {
		t.Fatalf("%s refused to start without naming %s", victim.Name(), snap)
	}
	t.Logf("%s refused to start, naming %s", victim.Name(), filepath.Base(snap))
}

func withCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable()}
}
