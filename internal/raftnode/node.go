package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/raftnode/wal"
)

var _ Local = (*Node)(nil)

var (
	// ErrStopped is returned by calls on a stopped (or stopping) node.
	ErrStopped = errors.New("raftnode: stopped")
	// ErrNoLeader is wrapped by LinearizableRead errors when its context
	// ended while no leader was known.
	ErrNoLeader = errors.New("raftnode: no leader")
	// ErrProposalUnconfirmed is wrapped, together with the context's
	// error, by Propose and ProposeConfChange when their context ended
	// before raft confirmed it took the proposal: raft holds proposals
	// back while it knows no leader. The proposal is most likely not in
	// the log, but may still get there.
	ErrProposalUnconfirmed = errors.New("raftnode: raft did not confirm the proposal")
	// ErrTooManyUncommitted is wrapped by Propose's error when the leader
	// refused the proposal because the entries it has taken and not yet
	// committed would pass Config.MaxUncommittedEntriesSize.
	ErrTooManyUncommitted = errors.New("raftnode: the uncommitted entries would pass their byte limit")
)

// Node is one running raft member: it persists raft's output, applies
// committed entries to the StateMachine and serves linearizable reads.
type Node struct {
	cfg       Config
	logger    *slog.Logger
	sm        StateMachine
	raft      *rawRaft
	storage   *raft.MemoryStorage
	wal       *wal.WAL
	snaps     *raftsnap.Store
	transport Transport
	metrics   *metrics
	// heartbeats times the leader's heartbeats (raft loop only).
	heartbeats heartbeatDetector

	// Published state, written by the raft and apply loops, read by
	// anyone without locks.
	lead          atomic.Uint64
	term          atomic.Uint64
	commitIndex   atomic.Uint64
	appliedIndex  atomic.Uint64
	confState     atomic.Pointer[raftpb.ConfState]
	leaderChanged *broadcast

	// applyc hands committed work from the raft loop to the apply loop.
	applyc chan toApply
	// apply is owned by the apply loop.
	apply        applyState
	snapshotting atomic.Bool
	// snapshotDone tells the apply loop that the snapshot in flight
	// finished, so that it takes the next one if the entries applied
	// meanwhile are due one (maybeSnapshot skips it while one is in
	// flight, and no later apply may come to start it).
	snapshotDone chan struct{}
	// fullImageBytes is the size of the newest snapshot file written with
	// the full image of a state machine that cannot persist in place
	// (maybeSnapshot spaces such snapshots by it).
	fullImageBytes atomic.Uint64
	snapshotWG     sync.WaitGroup
	// Lock order: the raft driver's lock (rawRaft.mu, driver.go), logMu
	// and readMu are never held together. rawRaft.mu and logMu each take
	// the raft log storage's own lock beneath them (RawNode reads the
	// storage under rawRaft.mu; appendToLog and compactLog change it
	// under logMu); readMu is a leaf.
	//
	// logMu serialises the changes to storage's entries (the raft loop
	// appends, the snapshot goroutine compacts) with the count of their
	// bytes, logBytes (logbudget.go). unsnapshottedBytes mirrors the
	// apply loop's loggedBytes for Overloaded.
	logMu              sync.Mutex
	logBytes           atomic.Int64
	unsnapshottedBytes atomic.Uint64
	// fullSnapshotIndex is the index of the newest snapshot whose file
	// holds a full image (not the in-place marker); raftStorage hands raft
	// only that one. fullSnapshotWanted carries raft's request for one to
	// the apply loop.
	fullSnapshotIndex  atomic.Uint64
	fullSnapshotWanted chan struct{}

	// Linearizable reads.
	readStates   chan raft.ReadState
	readWake     chan struct{}
	readMu       sync.Mutex
	nextRead     *readRound
	readSeq      atomic.Uint64 // sequence of this member's ReadIndex requests (read.go)
	readRounds   atomic.Uint64
	appliedWaits appliedWaiters

	// ctx is cancelled by Stop; it bounds internal calls into raft.
	ctx      context.Context
	cancel   context.CancelFunc
	stopping chan struct{}
	stopOnce sync.Once
	loops    sync.WaitGroup
	// failed is closed by fail; watchFailure, which Stop waits for, then
	// stops the node (the loops that fail cannot stop it themselves).
	failed     chan struct{}
	failOnce   sync.Once
	failWaiter sync.WaitGroup
	done       chan struct{}
	errMu      sync.Mutex
	err        error
}

// Start opens (or creates) the member's data directory, brings sm up to
// date with the newest snapshot, and starts raft. Committed entries that sm
// does not yet hold are applied again shortly after Start returns.
func Start(cfg Config, sm StateMachine) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg:                cfg,
		logger:             cfg.Logger.With("member", fmt.Sprintf("%x", cfg.ID)),
		sm:                 sm,
		storage:            raft.NewMemoryStorage(),
		transport:          cfg.Transport,
		metrics:            m,
		heartbeats:         newHeartbeatDetector(cfg.TickInterval * time.Duration(cfg.HeartbeatTicks)),
		leaderChanged:      newBroadcast(),
		applyc:             make(chan toApply),
		fullSnapshotWanted: make(chan struct{}, 1),
		snapshotDone:       make(chan struct{}, 1),
		readStates:         make(chan raft.ReadState, 64),
		readWake:           make(chan struct{}, 1),
		nextRead:           newReadRound(),
		ctx:                ctx,
		cancel:             cancel,
		stopping:           make(chan struct{}),
		failed:             make(chan struct{}),
		done:               make(chan struct{}),
	}
	if err := n.bootstrap(); err != nil {
		cancel()
		m.unregister()
		if n.wal != nil {
			err = errors.Join(err, n.wal.Close())
		}
		return nil, err
	}
	if n.transport != nil {
		n.transport.Attach(n)
	}
	n.failWaiter.Add(1)
	go n.watchFailure()
	n.loops.Add(3)
	go n.runRaft()
	go n.runApply()
	go n.runReads()
	return n, nil
}

// Propose asks raft to append data to the log. It returns once raft has
// accepted the proposal (not once it is committed); a proposal can still be
// lost, for example when leadership changes before it commits. While no
// leader is known it waits for one until ctx ends, and then returns an
// error wrapping ErrProposalUnconfirmed and ctx.Err().
func (n *Node) Propose(ctx context.Context, data []byte) error {
	return n.ProposeUntil(ctx, time.Time{}, data)
}

// ProposeUntil is Propose waiting for a leader until ctx ends or the
// deadline passes, whichever comes first (then the error wraps
// ErrProposalUnconfirmed and context.DeadlineExceeded). The deadline's
// timer is made only if there is a wait: a proposal to a member that
// knows its leader costs none (a timer per proposal was a few percent of
// a put's CPU at 1,000 clients).
func (n *Node) ProposeUntil(ctx context.Context, deadline time.Time, data []byte) error {
	select {
	case <-n.stopping:
		return ErrStopped
	default:
	}
	if err := n.raft.propose(ctx, deadline, n.leaderChanged, n.stopping, n.cfg.readIndexRetry(), n.removed, func(rn *raft.RawNode) error {
		err := rn.Propose(data)
		if errors.Is(err, raft.ErrProposalDropped) {
			// A leader drops a proposal while it transfers leadership,
			// once removed from the configuration, or when its
			// uncommitted entries would pass MaxUncommittedEntriesSize:
			// that is the one left.
			st := rn.Status()
			if _, member := st.Progress[st.ID]; member && st.RaftState == raft.StateLeader && st.LeadTransferee == raft.None {
				return fmt.Errorf("%w (%d bytes)", ErrTooManyUncommitted, n.cfg.MaxUncommittedEntriesSize)
			}
		}
		return err
	}); err != nil {
		n.metrics.proposalsFailed.Inc()
		return n.proposeError(ctx, "propose", err)
	}
	return nil
}

// removed reports whether this member applied its own removal from the
// configuration: raft.Node stopped taking its proposals then, and so does
// Propose (they wait until their context ends).
func (n *Node) removed() bool {
	cs := n.confState.Load()
	if cs == nil || (len(cs.Voters) == 0 && len(cs.Learners) == 0) {
		return false // not yet configured (a joining member)
	}
	return !slices.Contains(cs.Voters, n.cfg.ID) && !slices.Contains(cs.Learners, n.cfg.ID) &&
		!slices.Contains(cs.VotersOutgoing, n.cfg.ID) && !slices.Contains(cs.LearnersNext, n.cfg.ID)
}

// CountFailedProposal counts a proposal raft accepted that never came
// back applied in time (etcd_server_proposals_failed_total also counts
// those).
func (n *Node) CountFailedProposal() { n.metrics.proposalsFailed.Inc() }

// ProposeConfChange proposes a membership change; it takes effect when the
// entry is applied, unless the state machine vetoes it then
// (ConfChangeValidator). Errors are Propose's.
func (n *Node) ProposeConfChange(ctx context.Context, cc raftpb.ConfChangeI) error {
	select {
	case <-n.stopping:
		return ErrStopped
	default:
	}
	if err := n.raft.propose(ctx, time.Time{}, n.leaderChanged, n.stopping, n.cfg.readIndexRetry(), n.removed, func(rn *raft.RawNode) error {
		return rn.ProposeConfChange(cc)
	}); err != nil {
		n.metrics.proposalsFailed.Inc()
		return n.proposeError(ctx, "propose conf change", err)
	}
	return nil
}

// Step hands a message received from a peer to raft.
func (n *Node) Step(ctx context.Context, m raftpb.Message) error {
	select {
	case <-n.stopping:
		return ErrStopped
	default:
	}
	n.raft.step(m)
	return nil
}

// ReportUnreachable tells raft that the last message to id was not
// delivered, so it stops pipelining to that peer until it answers again.
func (n *Node) ReportUnreachable(id uint64) {
	n.raft.with(func(rn *raft.RawNode) { rn.ReportUnreachable(id) })
}

// ReportSnapshot tells raft how sending a snapshot to id ended.
func (n *Node) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	n.raft.with(func(rn *raft.RawNode) { rn.ReportSnapshot(id, status) })
}

// TransferLeadership asks the leader to hand leadership to transferee and
// waits until this member sees transferee as leader, or ctx ends.
func (n *Node) TransferLeadership(ctx context.Context, transferee uint64) error {
	changed := n.leaderChanged.next()
	lead := n.lead.Load()
	if lead == transferee {
		return nil
	}
	n.raft.with(func(rn *raft.RawNode) { rn.TransferLeader(transferee) })
	for {
		select {
		case <-changed:
			changed = n.leaderChanged.next()
			if n.lead.Load() == transferee {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("raftnode: transfer leadership to %x: %w", transferee, ctx.Err())
		case <-n.stopping:
			return ErrStopped
		}
	}
}

// Status is a snapshot of the member's raft state.
type Status struct {
	ID           uint64
	Leader       uint64 // 0: none known
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastIndex    uint64
	IsLeader     bool
	IsLearner    bool
	// Voters and Learners are the configuration as of the applied index.
	Voters   []uint64
	Learners []uint64
}

// Status returns the member's current state; it takes no raft round-trip.
func (n *Node) Status() Status {
	st := Status{
		ID:           n.cfg.ID,
		Leader:       n.lead.Load(),
		Term:         n.term.Load(),
		CommitIndex:  n.commitIndex.Load(),
		AppliedIndex: n.appliedIndex.Load(),
	}
	st.IsLeader = st.Leader == n.cfg.ID
	if last, err := n.storage.LastIndex(); err == nil {
		st.LastIndex = last
	}
	if cs := n.confState.Load(); cs != nil {
		st.Voters = slices.Clone(cs.Voters)
		st.Learners = slices.Clone(cs.Learners)
		st.IsLearner = slices.Contains(cs.Learners, n.cfg.ID)
	}
	return st
}

// RaftStatus is raft's own view of the member (term, vote, commit,
// state and, on a leader, each peer's progress), the value etcd publishes
// as raft.status in /debug/vars. It takes raft's lock: for debugging, not
// for request paths.
func (n *Node) RaftStatus() raft.Status {
	var st raft.Status
	n.raft.with(func(rn *raft.RawNode) { st = rn.Status() })
	return st
}

// Term is Status().Term, Leader Status().Leader and Indexes its
// CommitIndex and AppliedIndex, without the rest: Status locks raft's log
// storage and copies the configuration, which request paths (every
// response header's term, every proposal's apply-lag check) do not need.
func (n *Node) Term() uint64   { return n.term.Load() }
func (n *Node) Leader() uint64 { return n.lead.Load() }
func (n *Node) Indexes() (commit, applied uint64) {
	return n.commitIndex.Load(), n.appliedIndex.Load()
}

// FirstLogIndex is the first entry the in-memory raft log still holds:
// a follower that needs an earlier one gets a snapshot instead. A
// snapshot's file is saved before the log is compacted behind it.
func (n *Node) FirstLogIndex() uint64 {
	first, err := n.storage.FirstIndex()
	if err != nil {
		return 0
	}
	return first
}

// Snapshots is the member's snapshot file store: the transport reads the
// image of an outgoing MsgSnap from it and stores an incoming one in it.
func (n *Node) Snapshots() *raftsnap.Store { return n.snaps }

// Stop shuts the node down gracefully: new calls get ErrStopped, the apply
// in progress finishes, a snapshot being written completes, and the WAL is
// synced and closed. It is idempotent and returns once everything the
// node started has ended. The transport is its creator's to stop, after
// this.
func (n *Node) Stop() {
	n.shutdown()
	n.failWaiter.Wait()
}

// watchFailure stops the node after a fatal error (fail).
func (n *Node) watchFailure() {
	defer n.failWaiter.Done()
	select {
	case <-n.failed:
		n.shutdown()
	case <-n.stopping:
	}
}

func (n *Node) shutdown() {
	n.stopOnce.Do(func() {
		close(n.stopping)
		n.cancel()
		n.loops.Wait()
		n.snapshotWG.Wait()
		if err := n.wal.Close(); err != nil {
			n.setErr(fmt.Errorf("raftnode: close WAL: %w", err))
		}
		n.metrics.unregister()
		n.logger.Info("raft node stopped")
		close(n.done)
	})
	<-n.done
}

// Done is closed once the node has stopped, by Stop or after a fatal error.
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is the fatal error that stopped the node, if any.
func (n *Node) Err() error {
	n.errMu.Lock()
	defer n.errMu.Unlock()
	return n.err
}

func (n *Node) setErr(err error) {
	n.errMu.Lock()
	if n.err == nil {
		n.err = err
	}
	n.errMu.Unlock()
}

// fail records a fatal error (a failed disk write, a state machine that
// cannot apply or restore) and has the node stopped (watchFailure):
// continuing after losing durability would break raft's guarantees.
func (n *Node) fail(err error) {
	n.setErr(err)
	n.logger.Error("raft node failed, stopping", "err", err)
	n.failOnce.Do(func() { close(n.failed) })
}

// proposeError tells a proposal raft never confirmed (ctx ended first)
// from one it refused.
func (n *Node) proposeError(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); (ctxErr != nil && errors.Is(err, ctxErr)) || errors.Is(err, errDeadlinePassed) {
		return fmt.Errorf("raftnode: %s: %w: %w", op, ErrProposalUnconfirmed, err)
	}
	return n.raftError(op, err)
}

func (n *Node) raftError(op string, err error) error {
	if errors.Is(err, raft.ErrStopped) {
		return ErrStopped
	}
	return fmt.Errorf("raftnode: %s: %w", op, err)
}
