package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// slowLeaderStall is every fsync's delay on the slow leader: twice
	// the election timeout, so its heartbeats stop for longer than the
	// followers wait for them.
	slowLeaderStall = 2 * electionTimeout
	// leaderMoveWait bounds the wait for another member to lead: a few
	// election timeouts on an idle machine; room for a loaded one.
	leaderMoveWait = 30 * time.Second
	// movedPuts puts must be acknowledged after the move, within
	// movedPutsBound in all: at the slow disk's pace they would take
	// movedPuts x slowLeaderStall (60 s) or more. The bound only tells
	// the two apart, with room for a loaded machine.
	movedPuts      = 30
	movedPutsBound = 20 * time.Second
)

// TestSlowDiskLeader makes the leader's fsyncs stall for two election
// timeouts, switched on at runtime. As in etcd, whose raft loop blocks in
// the WAL save and so sends no heartbeats while it waits, the followers
// must elect another leader; the cluster keeps acknowledging writes,
// through the two healthy members, at their pace; when the disk heals
// the old leader catches up and every member holds every acknowledged
// write, with the same content.
//
// MetaStore's fsyncs are stalled through its disk-fault seam; etcd's,
// which has none (its gofail failpoints are not built here), by strace
// delaying its fdatasync and fsync calls (stall_test.go), so the
// expectation is checked against etcd too.
func TestSlowDiskLeader(t *testing.T) {
	staller := newFsyncStaller(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := framework.NewCluster(t, staller.clusterConfig(framework.ClusterConfig{Size: 3}))
	leaders := newLeaderFinder(c)
	defer leaders.close()
	slow := leaders.find(ctx, t)
	var healthy []*framework.Member
	for _, m := range c.Members() {
		if m != slow {
			healthy = append(healthy, m)
		}
	}
	var endpoints []string
	for _, m := range healthy {
		endpoints = append(endpoints, m.Endpoint())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: framework.DefaultDialTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	w := &timedWriter{cli: cli, prefix: "/slowleader/"}
	wctx, stopWrites := context.WithCancel(ctx)
	writing := make(chan struct{})
	go func() { w.run(wctx); close(writing) }()
	defer func() {
		stopWrites()
		<-writing
	}()

	heal := staller.stall(ctx, t, slow, slowLeaderStall)
	healed := false
	defer func() {
		if !healed {
			heal()
		}
	}()
	stalled := time.Now()
	newLeader := waitLeaderAmong(ctx, t, leaders, healthy, leaderMoveWait)
	moved := time.Now()
	t.Logf("%s (fsyncs stalled %v) led; %s leads %v after the stall began", slow.Name(), slowLeaderStall, newLeader.Name(), moved.Sub(stalled).Round(time.Millisecond))

	// The cluster serves at the healthy members' pace.
	before := w.acked()
	deadline := time.After(movedPutsBound)
	for w.acked() < before+movedPuts {
		select {
		case <-deadline:
			t.Fatalf("%d puts acknowledged in the %v after the leader moved away from the slow disk, want %d: the cluster is still paced by it",
				w.acked()-before, movedPutsBound, movedPuts)
		case <-w.progress():
		}
	}
	t.Logf("%d puts acknowledged in %v after the move", movedPuts, time.Since(moved).Round(time.Millisecond))
	// The slow member's own status may still say it leads: it learns
	// the election's outcome when its raft loop is through the stalled
	// fsync (etcd's does the same). The healthy members know.
	slowID := memberID(ctx, t, cli, slow)
	for _, m := range healthy {
		resp, err := cli.Status(ctx, m.Endpoint())
		if err != nil {
			t.Fatalf("status of %s: %v", m.Name(), err)
		}
		if resp.Leader == slowID {
			t.Errorf("%s follows %s again while its disk is slow", m.Name(), slow.Name())
		}
	}

	heal()
	healed = true
	stopWrites()
	<-writing
	a := w.acks()
	st := w.stats()
	t.Logf("puts: %d acknowledged, %d failed, slowest acknowledged %v (%s)", st.acked, st.failed, st.slowest.Round(time.Millisecond), st.slowestKey)

	// Converged: the healed member catches up, holds every acknowledged
	// put, and all three hold the same content.
	final, err := cli.Put(ctx, "/slowleader-final", "x")
	if err != nil {
		t.Fatal(err)
	}
	rev := final.Header.Revision
	scli := slow.NewClient(t)
	requireAcked(ctx, t, scli, "/slowleader/", a) // linearizable: it catches up first
	var hashes []uint32
	for _, m := range c.Members() {
		mcli := m.NewClient(t)
		// A linearizable read has the member apply up to the final put.
		if _, err := mcli.Get(ctx, "/slowleader-final"); err != nil {
			t.Fatalf("read through %s: %v", m.Name(), err)
		}
		resp, err := mcli.HashKV(ctx, m.Endpoint(), rev)
		if err != nil {
			t.Fatalf("HashKV at %d on %s: %v", rev, m.Name(), err)
		}
		hashes = append(hashes, resp.Hash)
	}
	if hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Errorf("the members' contents at revision %d differ: hashes %x", rev, hashes)
	}
}

// memberID is m's member ID, from its status.
func memberID(ctx context.Context, t *testing.T, cli *clientv3.Client, m *framework.Member) uint64 {
	t.Helper()
	resp, err := cli.Status(ctx, m.Endpoint())
	if err != nil {
		t.Fatalf("status of %s: %v", m.Name(), err)
	}
	return resp.Header.MemberId
}

// waitLeaderAmong waits until one of members says it leads (a stalled
// leader's own word is not asked: it may not know yet that it lost).
func waitLeaderAmong(ctx context.Context, t *testing.T, f *leaderFinder, members []*framework.Member, limit time.Duration) *framework.Member {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		if m := f.leaderAmong(wctx, t, members); m != nil {
			return m
		}
		select {
		case <-wctx.Done():
			t.Fatalf("none of %d members led within %v", len(members), limit)
		case <-time.After(50 * time.Millisecond): // the members' status is polled
		}
	}
}

// timedWriter puts distinct keys one after another, each with a
// deadline, recording what was acknowledged and how long it took.
type timedWriter struct {
	cli    *clientv3.Client
	prefix string

	mu       sync.Mutex
	puts     map[string]string
	failed   int
	slowest  time.Duration
	slowKey  string
	notified chan struct{} // closed and replaced on every acknowledgement
}

func (w *timedWriter) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		key, val := fmt.Sprintf("%s%06d", w.prefix, i), fmt.Sprintf("v%d", i)
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, putTimeout)
		_, err := w.cli.Put(pctx, key, val)
		cancel()
		took := time.Since(start)
		w.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				w.failed++
			}
		} else {
			if w.puts == nil {
				w.puts = map[string]string{}
			}
			w.puts[key] = val
			if took > w.slowest {
				w.slowest, w.slowKey = took, key
			}
			if w.notified != nil {
				close(w.notified)
				w.notified = nil
			}
		}
		w.mu.Unlock()
	}
}

func (w *timedWriter) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.puts)
}

// progress is closed at the next acknowledgement.
func (w *timedWriter) progress() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.notified == nil {
		w.notified = make(chan struct{})
	}
	return w.notified
}

func (w *timedWriter) acks() *acks {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := &acks{puts: map[string]string{}}
	for k, v := range w.puts {
		a.puts[k] = v
	}
	return a
}

type writerStats struct {
	acked, failed int
	slowest       time.Duration
	slowestKey    string
}

func (w *timedWriter) stats() writerStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return writerStats{acked: len(w.puts), failed: w.failed, slowest: w.slowest, slowestKey: w.slowKey}
}
