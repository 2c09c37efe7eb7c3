package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// acks records the puts a writer saw acknowledged.
type acks struct {
	mu   sync.Mutex
	puts map[string]string
}

// writeUntil puts distinct keys under prefix through cli until ctx ends,
// recording the acknowledged ones; failures (a member killed, a leader
// change) are retried with the next key.
func writeUntil(ctx context.Context, cli *clientv3.Client, prefix string) *acks {
	a := &acks{puts: map[string]string{}}
	for i := 0; ctx.Err() == nil; i++ {
		key, val := fmt.Sprintf("%s%06d", prefix, i), fmt.Sprintf("v%d", i)
		pctx, cancel := context.WithTimeout(ctx, putTimeout)
		_, err := cli.Put(pctx, key, val)
		cancel()
		if err == nil {
			a.mu.Lock()
			a.puts[key] = val
			a.mu.Unlock()
		}
	}
	return a
}

// requireAcked reads prefix through cli and fails for every acknowledged
// put that is missing or changed.
func requireAcked(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string, a *acks) {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("read %s: %v", prefix, err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	missing := 0
	for k, v := range a.puts {
		if got[k] != v {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged puts are missing or changed", missing, len(a.puts))
	}
}

// retryTransient repeats op while the cluster answers that it is busy
// reconfiguring or electing.
func retryTransient(ctx context.Context, t *testing.T, what string, op func(context.Context) error) {
	t.Helper()
	for {
		octx, cancel := context.WithTimeout(ctx, putTimeout)
		err := op(octx)
		cancel()
		if err == nil {
			return
		}
		transient := errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrTimeout) ||
			errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "leader")
		if !transient {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s kept failing: %v", what, err)
		case <-time.After(200 * time.Millisecond): // retry back-off
		}
	}
}

// TestLostDataDirRejoins wipes a member's whole data directory under a
// write load; the operator's way back (member remove, member add, start a
// new member with --initial-cluster-state=existing) gives a member that
// holds every acknowledged write and agrees with the others' HashKV.
func TestLostDataDirRejoins(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, SnapshotCount: 100})
	survivors := c.Members()[:2]
	lost := c.Member(2)
	cli := c.Member(0).NewClient(t)

	wctx, stopWrites := context.WithCancel(ctx)
	done := make(chan *acks)
	go func() { done <- writeUntil(wctx, c.Member(1).NewClient(t), "/rejoin/") }()

	var lostID uint64
	retryTransient(ctx, t, "member list", func(ctx context.Context) error {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, m := range resp.Members {
			if m.Name == lost.Name() {
				lostID = m.ID
			}
		}
		return nil
	})
	if _, err := lost.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(lost.DataDir()); err != nil {
		t.Fatal(err)
	}
	retryTransient(ctx, t, "member remove", func(ctx context.Context) error {
		_, err := cli.MemberRemove(ctx, lostID)
		return err
	})

	fresh, err := c.NewJoiningMember("m3")
	if err != nil {
		t.Fatal(err)
	}
	initial := []string{fresh.Name() + "=" + fresh.PeerURL()}
	for _, m := range survivors {
		initial = append(initial, m.Name()+"="+m.PeerURL())
	}
	retryTransient(ctx, t, "member add", func(ctx context.Context) error {
		_, err := cli.MemberAdd(ctx, []string{fresh.PeerURL()})
		return err
	})
	if err := fresh.Join(strings.Join(initial, ",")); err != nil {
		t.Fatal(err)
	}
	if err := fresh.WaitReady(ctx); err != nil {
		t.Fatalf("the new member did not become ready: %v", err)
	}
	stopWrites()
	a := <-done
	if len(a.puts) == 0 {
		t.Fatal("no put was acknowledged during the rejoin")
	}
	t.Logf("%d puts acknowledged while a member was lost and replaced", len(a.puts))

	// A linearizable read through the new member waits until it has
	// applied everything committed, so it sees every acknowledged put.
	freshCli := fresh.NewClient(t)
	requireAcked(ctx, t, freshCli, "/rejoin/", a)
	resp, err := cli.Put(ctx, "/rejoin-final", "x")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	var want uint32
	for i, m := range append(survivors, fresh) {
		mcli := m.NewClient(t)
		if _, err := mcli.Get(ctx, "/rejoin-final"); err != nil { // catch up to rev
			t.Fatal(err)
		}
		h, err := mcli.HashKV(ctx, m.ClientURL(), rev)
		if err != nil {
			t.Fatalf("HashKV on %s: %v", m.Name(), err)
		}
		if i == 0 {
			want = h.Hash
		} else if h.Hash != want {
			t.Errorf("%s's HashKV at %d is %x, %s's is %x", m.Name(), rev, h.Hash, survivors[0].Name(), want)
		}
	}
}
