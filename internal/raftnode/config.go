package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
)

// StateMachine is what the replicated log drives. raftnode calls Apply,
// Snapshot, Restore (and ValidateConfChange, below) from one goroutine
// (AppliedIndex also before Start returns), so the state machine needs no
// locking against itself; it must only make Image.WriteTo safe to run
// concurrently with later Applies.
type StateMachine interface {
	// AppliedIndex is the index of the last entry whose effects the state
	// machine holds: after a restart, what its engine recovered; 0 for a
	// fresh in-memory engine.
	AppliedIndex() uint64
	// Apply applies committed entries in log order. EntryNormal entries
	// with empty Data (a new leader's empty entry) are passed too: they
	// advance the index. A conf-change entry comes alone in its batch,
	// after the entries before it were applied and after raft's
	// configuration took the change (or, vetoed by ConfChangeValidator,
	// did not). Entries and their Data must not be modified. An error
	// means the state machine can no longer follow the log: the node
	// stops (Node.Err says why) rather than go on and diverge.
	Apply(entries []raftpb.Entry) error
	// Snapshot returns an image of the state as of the last Apply.
	Snapshot() (Image, error)
	// Restore replaces the whole state with an image written by a
	// Snapshot's WriteTo, captured at meta.Index.
	Restore(r io.Reader, meta raftpb.SnapshotMetadata) error
}

// IdleWorker is implemented by a StateMachine that has bounded work of
// its own to do on the apply goroutine when no entries are waiting (the
// store deletes a compaction's old revisions in steps). The apply loop
// calls IdleWork whenever it finds nothing to apply, as long as the last
// call reported more; a new batch of entries makes it try again.
type IdleWorker interface {
	// IdleWork does one bounded piece of the work and reports whether
	// more is left. An error stops the node, as Apply's does.
	IdleWork() (more bool, err error)
}

// ConfChangeValidator is implemented by a StateMachine that keeps its own
// record of the configuration (the server's member list) and refuses some
// changes: raft's configuration must follow only the changes it accepts,
// or the two would diverge when conflicting changes race through the log
// (two adds of one peer URL proposed on two members both commit; only
// the first may take effect). A state machine without one accepts every
// change.
//
// For each committed conf-change entry, in log order, raftnode passes
// every entry before it to Apply, then calls ValidateConfChange, then
// applies the change to raft's configuration — or, when it was vetoed, a
// change of node raft.None in its place, which raft skips (etcd's
// cc.NodeID = raft.None) — and then passes the entry itself to Apply, so
// the state machine can answer its proposer either way.
//
// Example: member list {1, 2, 3}; entries 7 "add 4 at URL u" and 8 "add 5
// at URL u" commit. At 7 the list has no u: accepted, raft and the list
// both gain 4. At 8 u belongs to 4: vetoed, raft applies the no-op, its
// configuration stays {1, 2, 3, 4}, equal to the list, and Apply of 8
// answers the proposer of 5 with the error.
type ConfChangeValidator interface {
	// ValidateConfChange returns nil if the committed conf change at index
	// takes effect, or why it does not. The decision must follow from
	// replicated state only (the entries before index), never from local
	// flags or clocks, so that every member decides alike.
	//
	// After a restart raft redelivers entries from its snapshot on to
	// rebuild its configuration, including entries the state machine
	// already holds (index <= AppliedIndex at Start). For those the state
	// machine must return the decision it took when it applied the entry
	// (it has to record vetoes durably with the entry): its state has moved
	// past the entry and would decide differently.
	ValidateConfChange(index uint64, cc raftpb.ConfChangeI) error
}

// Image is a point-in-time image of a state machine. WriteTo may run in
// another goroutine while Apply goes on; Release is called once when done.
// It is declared with the snapshot file format, below raftnode, so that a
// state machine (or a test's fake) can be written without importing raftnode.
type Image = raftsnap.Source

// Transport carries raft messages to the other members. Whoever creates
// it passes it in Config and stops it after Node.Stop.
type Transport interface {
	// Attach connects the transport's receiving side to the node. Start
	// calls it once, when the node's files are open and before raft runs:
	// until then the transport refuses raft traffic.
	Attach(local Local)
	// Send queues msgs for delivery and returns without blocking: a
	// message that cannot be queued is dropped and its destination
	// reported with Local.ReportUnreachable. Send must not keep msgs or
	// their Entries slices after it returns (copy what it queues). For a
	// MsgSnap it must stream the snapshot file (Local.Snapshots) and call
	// Local.ReportSnapshot when done; the receiving transport must store
	// that file with raftsnap.Store.Save before stepping the MsgSnap.
	Send(msgs []raftpb.Message)
}

// Local is the node as its transport drives it; *Node implements it.
type Local interface {
	// Step hands raft a message received from a peer.
	Step(ctx context.Context, m raftpb.Message) error
	// ReportUnreachable tells raft a message to id was not delivered.
	ReportUnreachable(id uint64)
	// ReportSnapshot tells raft how sending a snapshot to id ended.
	ReportSnapshot(id uint64, status raft.SnapshotStatus)
	// Snapshots is the snapshot file store outgoing snapshots are read
	// from and incoming ones saved to.
	Snapshots() *raftsnap.Store
}

// Config describes one member.
type Config struct {
	// ID is this member's raft ID (non-zero, never reused); ClusterID
	// names the cluster. Both are recorded in the WAL and checked on
	// restart.
	ID, ClusterID uint64
	// Peers bootstraps the cluster configuration when the data dir is new
	// (empty: just this member). Join starts a new member without peers:
	// it learns the configuration from the leader after being added
	// through a conf change.
	Peers []raft.Peer
	Join  bool
	// DataDir is the member directory; the WAL lives in DataDir/wal and
	// snapshot files in DataDir/snap.
	DataDir string
	// TickInterval is one raft tick (the heartbeat interval when
	// HeartbeatTicks is 1). Default 100ms.
	TickInterval time.Duration
	// ElectionTicks and HeartbeatTicks are the election timeout and
	// heartbeat interval in ticks. Defaults 10 and 1, etcd's 1000ms/100ms.
	ElectionTicks, HeartbeatTicks int
	// SnapshotCount is how many applied entries trigger a snapshot;
	// SnapshotCatchUpEntries how many entries before the snapshot stay in
	// the in-memory log for slow followers. Defaults 10000 and 5000.
	SnapshotCount, SnapshotCatchUpEntries uint64
	// MaxLogBytes is the byte budget of the in-memory log: a snapshot is
	// due once the entries since the last one hold half of it, at most
	// half of it stays behind a snapshot for followers, and Overloaded
	// reports entries since the last snapshot holding twice it
	// (logbudget.go). Default 256 MiB.
	MaxLogBytes uint64
	// ReadTimeout bounds a linearizable read round: one not answered
	// (confirmed and applied) this long after it started ends with
	// ErrReadTimeout for every caller in it, as etcd's read loop ends a
	// round with "request timed out". A caller joins the round after the
	// one in flight, so it waits at least ReadTimeout and at most that
	// round's time more, as in etcd. Zero: a round retries until its
	// callers give up.
	ReadTimeout time.Duration
	// DisablePreVote turns off raft's pre-vote (etcd's --pre-vote=false).
	DisablePreVote bool
	// DisableElectionTickAdvance makes a lone voter wait a full election
	// timeout at start instead of standing at once
	// (--initial-election-tick-advance=false).
	DisableElectionTickAdvance bool
	// MaxSizePerMsg, MaxInflightMsgs and MaxUncommittedEntriesSize are
	// raft's flow control limits. Defaults 1 MiB, 512 and MaxLogBytes/2
	// (logbudget.go: the entries a leader has taken and not yet
	// committed are part of the log's byte budget; a proposal past it
	// fails with ErrTooManyUncommitted).
	MaxSizePerMsg             uint64
	MaxInflightMsgs           int
	MaxUncommittedEntriesSize uint64
	// WALSegmentSizeBytes is the WAL segment size. Default 64 MiB.
	WALSegmentSizeBytes int64
	// WALDir, if set, holds the WAL instead of DataDir/wal (etcd's
	// --wal-dir, for a log on its own disk).
	WALDir string
	// MaxSnapshotFiles is how many snapshot files are kept (etcd's
	// --max-snapshots): 0 raftsnap's default of 5, negative unlimited.
	MaxSnapshotFiles int
	// MaxWALFiles is how many WAL segment files to keep, released ones
	// included (etcd's --max-wals): 0 deletes each released segment at
	// once, negative keeps them all.
	MaxWALFiles int
	// ForceNewCluster, on a restart, makes this member a one-member
	// cluster with its data (etcd's --force-new-cluster, force.go).
	ForceNewCluster bool
	// UnsafeNoFsync skips every fsync of the WAL and snapshot files
	// (etcd's --unsafe-no-fsync): a crash loses acknowledged writes.
	// For tests only.
	UnsafeNoFsync bool
	// Transport carries messages to peers; nil for a single member.
	Transport Transport
	// Logger receives structured logs. Nil discards them.
	Logger *slog.Logger
	// Metrics receives the node's Prometheus collectors. Nil registers
	// nothing; the global registry is never used.
	Metrics prometheus.Registerer
	// OnLeaderChange is called from the raft loop when the known leader
	// changes (leader 0: none known). It must not block or call Stop.
	OnLeaderChange func(leader, term uint64)

	// syncFile replaces the WAL's fsync; tests use it to simulate power
	// loss at the last synced size.
	syncFile func(*os.File) error
}

const (
	defaultTickInterval           = 100 * time.Millisecond
	defaultElectionTicks          = 10
	defaultHeartbeatTicks         = 1
	defaultSnapshotCount          = 10000
	defaultSnapshotCatchUpEntries = 5000
	defaultMaxLogBytes            = 256 << 20
	defaultMaxSizePerMsg          = 1 << 20
	defaultMaxInflightMsgs        = 512
)

// withDefaults fills unset fields and rejects impossible combinations.
func (c Config) withDefaults() (Config, error) {
	if c.ID == 0 {
		return c, errors.New("raftnode: config: ID must be non-zero")
	}
	if c.DataDir == "" {
		return c, errors.New("raftnode: config: DataDir is required")
	}
	if c.TickInterval <= 0 {
		c.TickInterval = defaultTickInterval
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = defaultElectionTicks
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = defaultHeartbeatTicks
	}
	if c.ElectionTicks <= c.HeartbeatTicks {
		return c, fmt.Errorf("raftnode: config: ElectionTicks (%d) must exceed HeartbeatTicks (%d)", c.ElectionTicks, c.HeartbeatTicks)
	}
	if c.SnapshotCount == 0 {
		c.SnapshotCount = defaultSnapshotCount
	}
	if c.SnapshotCatchUpEntries == 0 {
		c.SnapshotCatchUpEntries = defaultSnapshotCatchUpEntries
	}
	if c.MaxLogBytes == 0 {
		c.MaxLogBytes = defaultMaxLogBytes
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = defaultMaxSizePerMsg
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = defaultMaxInflightMsgs
	}
	if c.MaxUncommittedEntriesSize == 0 {
		c.MaxUncommittedEntriesSize = max(c.MaxLogBytes/2, 1)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Join && len(c.Peers) > 0 {
		return c, errors.New("raftnode: config: Join and Peers are exclusive")
	}
	if !c.Join && len(c.Peers) == 0 {
		c.Peers = []raft.Peer{{ID: c.ID}}
	}
	if !c.Join && !slices.ContainsFunc(c.Peers, func(p raft.Peer) bool { return p.ID == c.ID }) {
		return c, fmt.Errorf("raftnode: config: bootstrap peers do not include member %x itself", c.ID)
	}
	if c.Transport == nil {
		if c.Join {
			return c, errors.New("raftnode: config: joining a cluster needs a Transport")
		}
		for _, p := range c.Peers {
			if p.ID != c.ID {
				return c, fmt.Errorf("raftnode: config: peer %x needs a Transport", p.ID)
			}
		}
	}
	return c, nil
}

// readIndexRetry is how long a ReadIndex round waits for its answer before
// asking again (the request or its answer may have been dropped). Half an
// election timeout: 500ms with etcd's defaults, like etcd's retry.
func (c Config) readIndexRetry() time.Duration {
	return c.TickInterval * time.Duration(c.ElectionTicks) / 2
}

// RecoveredCommitObserver is an optional interface of a StateMachine: a
// restarting node tells it, before any entry is applied, the commit index
// its WAL recorded. Entries up to it were committed before the restart and
// are replayed now; state that lived only in the previous process's memory
// (an auth simple token) must not be recreated by the replay.
type RecoveredCommitObserver interface {
	RecoveredCommit(index uint64)
}
