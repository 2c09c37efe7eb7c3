package statemachine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/lease"
	"github.com/metastore-io/metastore/internal/memory"
)

// The data-driven tests (testdata/*.txt, in the format of
// github.com/cockroachdb/datadriven, as go.etcd.io/raft's) feed recorded
// entries to a state machine built over a fresh memory store, exactly as
// raft would: a command such as put, txn, lease-grant or member-add
// appends one committed entry to the pending batch and prints its index;
// apply hands the batch to StateMachine.Apply and prints what every
// proposer was answered, the events the watch hub received, the notices
// posted and the hooks called; kv, leases, members, alarms, auth and
// vetoes dump the state; idle runs the compaction steps of an idle member. The commands are listed in runCommand
// (datadriven_cmds_test.go builds the entries).
//
// After each file the whole log is applied again, in the same batches,
// to a second state machine: the two stores must hash alike and every
// answer must be the same (apply is deterministic).
//
// Rewrite the expected output after a deliberate change with
// go test ./internal/statemachine -run TestDataDriven -rewrite.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := newEnv(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return e.runCommand(t, d)
		})
		e.checkReplay(t)
	})
}

// env is one state machine over its own parts, and the log applied to it.
type env struct {
	kv      *kvstore.Store
	lessor  *lease.Lessor
	cluster *membership.Cluster
	auth    *auth.Store
	alarms  *Alarms
	notices *Notices
	sm      *StateMachine
	waiter  recordingWaiter
	hub     recordingHub
	hooks   []string // hook calls since the last apply
	// leadingTerm is the term this member leads in (LeaderEntry).
	leadingTerm uint64

	index, term uint64
	queue       []raftpb.Entry
	labels      map[uint64]string // the command that made each entry
	batches     []batch           // the log as applied
	answers     []string          // every apply's output, in order
}

// batch is one Apply of the log, with what the member's side was then.
type batch struct {
	entries     []raftpb.Entry
	leadingTerm uint64
	quota       int64
}

// memberID and clusterID are the member the state machine runs on.
const (
	memberID  = 1
	clusterID = 0xc1
)

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{term: 1, labels: map[uint64]string{}, waiter: recordingWaiter{}}
	var err error
	if e.lessor, err = lease.New(lease.Config{MinTTL: 1}); err != nil {
		t.Fatal(err)
	}
	if e.kv, err = kvstore.Open(memory.New(), kvstore.Options{Leases: e.lessor}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.kv.Close() })
	if e.auth, err = auth.New(e.kv, auth.Options{BcryptCost: 4}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.auth.Close)
	// The member itself, as a new cluster's bootstrap entries leave it.
	e.cluster = membership.New(memberID, clusterID)
	e.cluster.Add(e.kv, &membershippb.Member{ID: memberID, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{"http://m1:2380"}}})
	if _, err := e.kv.Commit(); err != nil {
		t.Fatal(err)
	}
	e.alarms = NewAlarms()
	e.notices = NewNotices()
	e.sm = New(Deps{
		KV: e.kv, Lessor: e.lessor, Cluster: e.cluster, Auth: e.auth, Alarms: e.alarms,
		Quota: NewQuota(-1, e.kv.Size, discardLog), Hub: &e.hub, Waiter: e.waiter, Notices: e.notices,
		LeaderEntry:   func(term uint64) bool { return term == e.leadingTerm },
		AlarmsChanged: func(active []*pb.AlarmMember) { e.hooks = append(e.hooks, "alarms changed: "+fmtAlarms(active)) },
		PeersChanged:  func() { e.hooks = append(e.hooks, "peers changed") },
		Fatal:         func(msg string, err error) { e.hooks = append(e.hooks, fmt.Sprintf("fatal: %s: %v", msg, err)) },
	})
	return e
}

// recordingWaiter keeps every answer by request ID (the request ID of an
// entry is its index).
type recordingWaiter map[uint64]Result

func (w recordingWaiter) Trigger(id uint64, r Result) { w[id] = r }

// recordingHub keeps what each commit published.
type recordingHub struct{ lines []string }

func (h *recordingHub) Publish(rev int64, events []mvccpb.Event) {
	var b strings.Builder
	fmt.Fprintf(&b, "published rev=%d:", rev)
	for _, ev := range events {
		fmt.Fprintf(&b, " %s %s", ev.Type, ev.Kv.Key)
		if ev.Type == mvccpb.PUT {
			fmt.Fprintf(&b, "=%s", ev.Kv.Value)
		}
	}
	h.lines = append(h.lines, b.String())
}

// runCommand runs one command of a test file and returns its output.
func (e *env) runCommand(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "apply":
		return e.apply(t)
	case "leader":
		// leader term=N: this member leads from term N on; the next
		// entry (an empty one: append "empty") starts the term.
		e.leadingTerm = uint64(intArg(t, d, "term", 0))
		e.term = e.leadingTerm
		return "ok"
	case "quota":
		// quota limit=N: the backend quota in bytes (the store's size
		// is the memory engine's: its keys and values).
		e.sm.Quota = NewQuota(intArg(t, d, "limit", -1), e.kv.Size, discardLog)
		return fmt.Sprintf("quota %d, size %d", e.sm.Quota.Limit(), e.kv.Size())
	case "idle":
		// idle: the idle member's compaction steps (IdleWork) until none
		// is left; the physical compactions wait on the watermark.
		for {
			more, err := e.sm.IdleWork()
			if err != nil || !more {
				return fmt.Sprintf("%s; finished compaction at %d", fmtErr(err), e.sm.Compacted.Index())
			}
		}
	case "kv":
		return e.dumpKV(t, d)
	case "leases":
		return e.dumpLeases(t)
	case "members":
		return e.dumpMembers()
	case "alarms":
		return fmtAlarms(e.alarms.Get(pb.AlarmType_NONE))
	case "auth":
		return e.dumpAuth(t)
	case "vetoes":
		return e.dumpVetoes(t)
	case "validate":
		// validate: ValidateConfChange on the pending conf change (raft
		// asks it just before applying the entry).
		last := e.queue[len(e.queue)-1]
		cc, _, err := decodeConfChange(&last)
		if err != nil {
			t.Fatal(err)
		}
		return fmtErr(e.sm.ValidateConfChange(last.Index, cc))
	}
	ent, err := e.entryFor(t, d)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	e.index++
	ent.Index, ent.Term = e.index, e.term
	e.queue = append(e.queue, ent)
	e.labels[ent.Index] = d.Cmd
	return fmt.Sprintf("index %d", ent.Index)
}

// apply applies the pending entries as one batch and reports what came
// of it.
func (e *env) apply(t *testing.T) string {
	entries := e.queue
	e.queue = nil
	e.batches = append(e.batches, batch{entries: entries, leadingTerm: e.leadingTerm, quota: e.sm.Quota.Limit()})
	var b strings.Builder
	if err := e.sm.Apply(entries); err != nil {
		fmt.Fprintf(&b, "apply failed: %v\n", err)
	}
	for _, ent := range entries {
		fmt.Fprintf(&b, "%d %s: ", ent.Index, e.labels[ent.Index])
		r, ok := e.waiter[ent.Index]
		delete(e.waiter, ent.Index)
		if !ok {
			b.WriteString("no answer\n")
			continue
		}
		b.WriteString(fmtResult(r) + "\n")
	}
	for _, l := range e.hub.lines {
		b.WriteString(l + "\n")
	}
	e.hub.lines = nil
	for _, n := range e.notices.Take() {
		b.WriteString(fmtNotice(n) + "\n")
	}
	for _, h := range e.hooks {
		b.WriteString(h + "\n")
	}
	e.hooks = nil
	out := b.String()
	e.answers = append(e.answers, out)
	return out
}

// checkReplay applies the log again to a fresh state machine, in the same
// batches: the stores must hash alike and the answers be the same.
func (e *env) checkReplay(t *testing.T) {
	if len(e.batches) == 0 {
		return
	}
	r := newEnv(t)
	r.labels = e.labels
	for i, b := range e.batches {
		r.leadingTerm = b.leadingTerm
		r.sm.Quota = NewQuota(b.quota, r.kv.Size, discardLog)
		r.queue = b.entries
		if got, want := r.apply(t), e.answers[i]; got != want {
			t.Errorf("replay of batch %d answered\n%s\nthe first time\n%s", i, got, want)
		}
	}
	h1, err1 := e.kv.Hash()
	h2, err2 := r.kv.Hash()
	if err1 != nil || err2 != nil || h1 != h2 {
		t.Errorf("replayed store hashes %x (%v), the first %x (%v)", h2, err2, h1, err1)
	}
	if got, want := fmtAlarms(r.alarms.Get(pb.AlarmType_NONE)), fmtAlarms(e.alarms.Get(pb.AlarmType_NONE)); got != want {
		t.Errorf("replayed alarms %s, the first %s", got, want)
	}
}
