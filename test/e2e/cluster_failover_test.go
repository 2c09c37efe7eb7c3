package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// loadWriters is how many goroutines write during the failover test.
const loadWriters = 8

// loadGenerator puts unique keys through a client balanced over the whole
// cluster and records every acknowledged put. Failed puts are expected
// while a member dies (their fate is unknown, so they are not recorded);
// the writers go on with new keys.
type loadGenerator struct {
	acks   *ackLog
	failed atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}
	// reached is signalled (without blocking) on every ack.
	reached chan struct{}
}

func startLoad(ctx context.Context, cli *clientv3.Client, prefix string) *loadGenerator {
	ctx, cancel := context.WithCancel(ctx)
	g := &loadGenerator{acks: newAckLog(), cancel: cancel, done: make(chan struct{}), reached: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	for w := range loadWriters {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("%s/w%d/%07d", prefix, w, i)
				value := "v-" + key
				putCtx, cancel := context.WithTimeout(ctx, putTimeout)
				resp, err := cli.Put(putCtx, key, value)
				cancel()
				if err != nil {
					g.failed.Add(1)
					continue
				}
				g.acks.add(key, ackedPut{value: value, modRevision: resp.Header.Revision})
				select {
				case g.reached <- struct{}{}:
				default:
				}
			}
		})
	}
	go func() { wg.Wait(); close(g.done) }()
	return g
}

// waitAcks waits until n puts in total have been acknowledged.
func (g *loadGenerator) waitAcks(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for {
		g.acks.mu.Lock()
		count := g.acks.count
		g.acks.mu.Unlock()
		if count >= n {
			return
		}
		select {
		case <-g.reached:
		case <-ctx.Done():
			t.Fatalf("only %d of %d puts acknowledged (%d failed): %v", count, n, g.failed.Load(), ctx.Err())
		}
	}
}

func (g *loadGenerator) stop() {
	g.cancel()
	<-g.done
}

// TestClusterKillLeaderUnderLoad kills the leader of a 3-member cluster
// with SIGKILL while writes flow: the others elect a new leader within a
// few election timeouts and keep acknowledging writes, the killed member
// restarts and catches up (by snapshot, with this snapshot count), no
// acknowledged write is lost on any member, and all hash alike.
func TestClusterKillLeaderUnderLoad(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, SnapshotCount: 200})
	mc := newMemberClients(t, c)
	leader := mc.waitLeader(ctx, t, c.Members())
	survivors := others(c.Members(), leader)

	load := startLoad(ctx, c.NewClient(t), "/failover")
	load.waitAcks(ctx, t, 300)

	killedAt := time.Now()
	if _, err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	leaderCtx, cancel := context.WithTimeout(ctx, leaderBound)
	newLeader := mc.waitLeader(leaderCtx, t, survivors)
	cancel()
	t.Logf("%s killed; %s leads after %v", leader.Name(), newLeader.Name(), time.Since(killedAt).Round(time.Millisecond))

	// The survivors keep serving writes without the killed member.
	load.acks.mu.Lock()
	atKill := load.acks.count
	load.acks.mu.Unlock()
	load.waitAcks(ctx, t, atKill+600)
	load.stop()
	t.Logf("%d puts acknowledged, %d failed around the kill", load.acks.count, load.failed.Load())

	if err := leader.Restart(ctx); err != nil {
		t.Fatalf("restart %s: %v", leader.Name(), err)
	}
	if c.Target() == framework.TargetMetaStore {
		// 600 writes behind with snapshots every 200 entries (and 100
		// kept behind each): the log it needed is gone, so the leader
		// must have sent a snapshot.
		waitForLog(ctx, t, leader, "installed snapshot from leader")
	}
	for _, m := range c.Members() {
		requireAcked(ctx, t, mc.of(t, m), "/failover", load.acks)
	}
	rev := mustGet(ctx, t, mc.of(t, newLeader), "/failover/", clientv3.WithCountOnly(), clientv3.WithPrefix()).Header.Revision
	mc.requireSameHashKV(ctx, t, c.Members(), rev)
}
