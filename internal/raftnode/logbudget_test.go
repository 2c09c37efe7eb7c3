package raftnode

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/metastore-io/metastore/internal/raftnode/wal"

	"github.com/metastore-io/metastore/test/raftkit"
)

// storedLogBytes sums the entries in n's in-memory log, for checking
// the running count against.
func storedLogBytes(t *testing.T, n *Node) uint64 {
	t.Helper()
	n.logMu.Lock()
	defer n.logMu.Unlock()
	first, _ := n.storage.FirstIndex()
	last, _ := n.storage.LastIndex()
	if last < first {
		return 0
	}
	ents, err := n.storage.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		t.Fatalf("entries %d-%d: %v", first, last, err)
	}
	return entriesBytes(ents)
}

// storedLogBytesTo sums the entries of n's in-memory log up to index.
func storedLogBytesTo(t *testing.T, n *Node, index uint64) uint64 {
	t.Helper()
	n.logMu.Lock()
	defer n.logMu.Unlock()
	first, _ := n.storage.FirstIndex()
	if index < first {
		return 0
	}
	b, err := n.logBytesIn(first, index)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bigPayloads returns n payloads of size bytes, each distinct.
func bigPayloads(prefix string, n, size int) []string {
	out := make([]string, n)
	for i := range out {
		head := fmt.Sprintf("%s-%05d-", prefix, i)
		out[i] = head + strings.Repeat("x", size-len(head))
	}
	return out
}

// waitSnapshotsSettled waits until n's apply loop has counted every entry
// sm applied, no snapshot is in flight and none is due: the log is then as
// the byte budget leaves it, and stays so while nothing is proposed. (The
// entry count passed as 0: these tests' SnapshotCount is never reached.)
func waitSnapshotsSettled(t *testing.T, n *Node, sm *raftkit.StateMachine) {
	t.Helper()
	raftkit.WaitFor(t, "the snapshots to catch up with the applied entries", func() bool {
		// In the reverse of the order the apply loop writes them: the
		// applied index after the bytes, the bytes cleared after a
		// snapshot is marked in flight (maybeSnapshot).
		if n.appliedIndex.Load() < sm.AppliedIndex() {
			return false
		}
		logged := n.unsnapshottedBytes.Load()
		return !n.snapshotting.Load() && !n.snapshotDue(0, logged)
	})
}

// TestLogBytesStayWithinBudget proposes entries far larger than the
// default snapshot count allows for: the log in memory is snapshotted and
// compacted by bytes, its running count is exact, and a restart brings
// back everything.
func TestLogBytesStayWithinBudget(t *testing.T) {
	for _, kind := range []string{"full images", "in place"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir)
			cfg.MaxLogBytes = 64 << 10
			// The proposals below go faster than they commit; refusing
			// them (TestProposalsPastUncommittedBytesRefused) is not what
			// this test is about.
			cfg.MaxUncommittedEntriesSize = 1 << 30
			var sm StateMachine
			fake := raftkit.New()
			sm = fake
			if kind == "in place" {
				p := newPersistentSM()
				sm, fake = p, p.StateMachine
			}
			n := mustStart(t, cfg, sm)
			waitLeader(t, n)
			const entries, size = 120, 4 << 10 // 480 KiB in all
			for i, p := range bigPayloads("b", entries, size) {
				proposeAll(t, n, []string{p})
				fake.WaitPayloads(t, i+1)
			}
			waitSnapshotsSettled(t, n, fake)
			if got, want := n.LogBytes(), storedLogBytes(t, n); got != want {
				t.Fatalf("running count %d bytes, the log holds %d", got, want)
			}
			// Behind the newest snapshot at most MaxLogBytes/2 stay.
			snap, err := n.storage.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if kept := storedLogBytesTo(t, n, snap.Metadata.Index); kept > cfg.MaxLogBytes/2 {
				t.Fatalf("%d bytes kept behind the snapshot at %d, over %d", kept, snap.Metadata.Index, cfg.MaxLogBytes/2)
			}
			first, _ := n.storage.FirstIndex()
			if first < entries/2 {
				t.Fatalf("the log still starts at %d after %d entries of %d bytes", first, entries, size)
			}
			fake.Check(t)
			n.Stop()

			fresh := raftkit.New()
			var sm2 StateMachine = fresh
			if kind == "in place" {
				sm2, fresh = sm, fake // the engine keeps what it persisted
			}
			n2 := mustStart(t, cfg, sm2)
			waitLeader(t, n2)
			proposeAll(t, n2, []string{"tail"})
			fresh.WaitUntil(t, "the tail applied", func(st *raftkit.State) bool {
				return len(st.Payloads) > 0 && st.Payloads[len(st.Payloads)-1] == "tail"
			})
			if got, want := n2.LogBytes(), storedLogBytes(t, n2); got != want {
				t.Fatalf("after restart: running count %d bytes, the log holds %d", got, want)
			}
		})
	}
}

// TestLaggingFollowerBeyondLogBudgetGetsSnapshot: the leader keeps only
// MaxLogBytes/2 of entries for followers, so one that missed more is sent
// a snapshot, however few entries that is.
func TestLaggingFollowerBeyondLogBudgetGetsSnapshot(t *testing.T) {
	c := startCluster(t, func(cfg *Config) {
		cfg.MaxLogBytes = 64 << 10
		cfg.MaxUncommittedEntriesSize = 1 << 30 // as in TestLogBytesStayWithinBudget
	})
	net, nodes, sms := c.net, c.nodes, c.sms
	lead := c.agreedLeader(t)
	lagging := c.follower(lead)
	net.isolate(lagging, true)

	const entries = 60 // 60 × 4 KiB: far fewer than the 5,000 catch-up entries
	proposeAll(t, nodes[lead], bigPayloads("p", entries, 4<<10))
	sms[lead].WaitPayloads(t, entries)
	laggingNext := sms[lagging].AppliedIndex() + 1
	// A snapshot is considered after each applied batch; one due while
	// another was being written waits for the next batch: a few small
	// entries bring it.
	ticks := 0
	raftkit.WaitFor(t, "leader to compact past the lagging member", func() bool {
		first, err := nodes[lead].storage.FirstIndex()
		if err == nil && first > laggingNext {
			return true
		}
		if !nodes[lead].snapshotting.Load() {
			ticks++
			proposeAll(t, nodes[lead], []string{fmt.Sprintf("tick-%d", ticks)})
		}
		return false
	})
	sms[lead].WaitPayloads(t, entries+ticks)
	net.isolate(lagging, false)
	sm := sms[lagging]
	sm.WaitPayloads(t, entries+ticks)
	sm.Check(t)
	restores := sm.Restores()
	if restores == 0 {
		t.Fatal("lagging member caught up without a snapshot")
	}
	if got, want := strings.Join(sm.Payloads(), ","), strings.Join(sms[lead].Payloads(), ","); got != want {
		t.Fatal("lagging member's state differs from the leader's")
	}
}

// TestOverloadedAtFourTimesWhatIsDue: proposals are to be refused once
// the entries since the last snapshot hold four times what makes a
// snapshot due, a quarter of the last full image when that is more than
// MaxLogBytes/2.
func TestOverloadedAtFourTimesWhatIsDue(t *testing.T) {
	n := &Node{cfg: Config{MaxLogBytes: 100}}
	for _, tt := range []struct {
		unsnapshotted, image uint64
		want                 bool
	}{
		{199, 0, false}, {200, 0, true},
		{999, 1000, false}, {1000, 1000, true},
	} {
		n.unsnapshottedBytes.Store(tt.unsnapshotted)
		n.fullImageBytes.Store(tt.image)
		if got := n.Overloaded(); got != tt.want {
			t.Errorf("%d bytes since the snapshot, image %d: Overloaded %v, want %v", tt.unsnapshotted, tt.image, got, tt.want)
		}
	}
}

// TestProposalsPastUncommittedBytesRefused stalls the leader's WAL fsync
// and proposes until raft refuses: the entries it took and could not
// commit are bounded by MaxUncommittedEntriesSize, and the refusal is
// ErrTooManyUncommitted (the server's "too many requests"), not a wait.
// Once the disk moves again every accepted proposal is applied and new
// ones are taken.
func TestProposalsPastUncommittedBytesRefused(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	const entry = 16 << 10
	cfg.MaxUncommittedEntriesSize = 8 * entry
	stall := make(chan struct{})
	var stalled atomic.Bool
	cfg.syncFile = func(f *os.File) error {
		if stalled.Load() {
			<-stall
		}
		return wal.SyncData(f)
	}
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	sm.WaitUntil(t, "the leader's empty entry", func(st *raftkit.State) bool { return st.Applied >= 1 })
	stalled.Store(true)
	released := false
	defer func() {
		if !released {
			close(stall)
		}
	}()
	ctx := raftkit.Context(t)
	accepted := 0
	var err error
	for accepted <= 2*8 {
		payload := fmt.Sprintf("%05d%s", accepted, strings.Repeat("u", entry-5))
		if err = n.Propose(ctx, []byte(payload)); err != nil {
			break
		}
		accepted++
	}
	if !errors.Is(err, ErrTooManyUncommitted) {
		t.Fatalf("after %d proposals of %d bytes with the disk stalled: %v, want ErrTooManyUncommitted", accepted, entry, err)
	}
	if accepted > 8+1 {
		t.Fatalf("raft took %d proposals of %d bytes, over the limit of %d bytes", accepted, entry, cfg.MaxUncommittedEntriesSize)
	}
	stalled.Store(false)
	close(stall)
	released = true
	sm.WaitPayloads(t, accepted)
	if err := n.Propose(ctx, []byte("after")); err != nil {
		t.Fatalf("a proposal once the disk moved again: %v", err)
	}
	sm.WaitPayloads(t, accepted+1)
}

// TestSnapshotDueWhileOneWasInFlightIsTaken keeps a snapshot in flight
// while entries pile up past the overload bound, then lets it finish and
// proposes nothing more: the snapshot the applied entries are due must
// still be taken, or the member would go on refusing every proposal as
// overloaded (the server's "too many requests") with nothing left to
// apply that could start it.
func TestSnapshotDueWhileOneWasInFlightIsTaken(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxLogBytes = 64 << 10
	cfg.MaxUncommittedEntriesSize = 1 << 30 // as in TestLogBytesStayWithinBudget
	sm := newPersistentSM()
	sm.persistGate = make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(sm.persistGate)
		}
	}
	defer release() // before the node's Stop, which waits for the snapshot
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)

	const size = 4 << 10
	first := bigPayloads("a", int(cfg.MaxLogBytes/2/size)+1, size) // due a snapshot
	proposeAll(t, n, first)
	sm.WaitPayloads(t, len(first))
	raftkit.WaitFor(t, "a snapshot to be in flight", func() bool { return sm.persists.Load() > 0 })
	// Four times what is due, applied while that snapshot is held.
	more := bigPayloads("b", int(overloadFactor*cfg.MaxLogBytes/2/size)+1, size)
	proposeAll(t, n, more)
	sm.WaitPayloads(t, len(first)+len(more))
	raftkit.WaitFor(t, "the apply loop to count the entries applied", func() bool {
		return n.appliedIndex.Load() >= sm.AppliedIndex()
	})
	if !n.Overloaded() {
		t.Fatalf("not overloaded with %d bytes applied since the snapshot in flight", len(more)*size)
	}
	release()
	raftkit.WaitFor(t, "the next snapshot to be taken with nothing more proposed", func() bool { return !n.Overloaded() })
}
