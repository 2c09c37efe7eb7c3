package raftnode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
)

// readRound is one ReadIndex round-trip shared by every LinearizableRead
// that arrived while the previous round was in flight.
type readRound struct {
	// waiters counts callers still waiting; guarded by Node.readMu. Only
	// the round not yet started gains waiters, so a started round's count
	// only falls, and a round nobody waits for any more can be abandoned.
	waiters int
	// index is the commit index the round confirmed; set before the round
	// waits for apply.
	index uint64
	done  chan struct{}
	err   error // set before done closes
	once  sync.Once
	// expiry ends the round at Config.ReadTimeout (runReads); stopped
	// when the round finishes first.
	expiry atomic.Pointer[time.Timer]
}

func newReadRound() *readRound { return &readRound{done: make(chan struct{})} }

// finish answers the round's callers; the first call wins (the round's
// expiry may race with its answer).
func (r *readRound) finish(err error) {
	r.once.Do(func() {
		r.err = err
		close(r.done)
		if t := r.expiry.Load(); t != nil {
			t.Stop()
		}
	})
}

// ErrReadTimeout ends a linearizable read round that took longer than
// Config.ReadTimeout.
var ErrReadTimeout = errors.New("raftnode: linearizable read timed out")

// LinearizableRead returns once this member has applied at least the commit
// index confirmed by a ReadIndex round that started after the call: state
// read afterwards reflects every write committed before the call. Calls
// arriving while a round is in flight share the next round.
//
// Without a leader the round keeps retrying until ctx ends (the error then
// wraps both ErrNoLeader and ctx.Err()) or until Config.ReadTimeout has
// passed since it started (ErrReadTimeout): a caller needs no timer of its
// own for that bound, one per round is enough (a context.WithTimeout per
// read showed in the profiles: docs/performance.md, "Measurements behind
// the code"). After
// Stop it returns ErrStopped.
func (n *Node) LinearizableRead(ctx context.Context) error {
	select {
	case <-n.stopping:
		return ErrStopped
	default:
	}
	n.readMu.Lock()
	r := n.nextRead
	r.waiters++
	n.readMu.Unlock()
	select {
	case n.readWake <- struct{}{}:
	default: // a wake-up is already pending; the read loop will see r
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		n.readMu.Lock()
		r.waiters--
		n.readMu.Unlock()
		if n.lead.Load() == raft.None {
			return fmt.Errorf("raftnode: linearizable read: %w: %w", ErrNoLeader, ctx.Err())
		}
		return fmt.Errorf("raftnode: linearizable read: %w", ctx.Err())
	case <-n.stopping:
		return ErrStopped
	}
}

// runReads is the read loop: one ReadIndex round at a time, each serving
// all callers that joined it. A confirmed round is handed to the applied
// index waiters and the loop moves on, so the next round's network
// round-trip overlaps the previous round's wait for apply.
func (n *Node) runReads() {
	defer n.loops.Done()
	// Sequence numbers of this incarnation start above any an earlier one
	// can have used (it made far fewer than one request per nanosecond),
	// so an answer to a request sent before a restart is never taken for
	// one of ours: its index could predate reads made now.
	n.readSeq.Store(uint64(time.Now().UnixNano()))
	for {
		select {
		case <-n.readWake:
		case <-n.stopping:
			return
		}
		n.readMu.Lock()
		r := n.nextRead
		if r.waiters == 0 {
			// Its callers gave up, or a stale wake-up: keep it as next.
			n.readMu.Unlock()
			continue
		}
		n.nextRead = newReadRound()
		n.readMu.Unlock()
		if d := n.cfg.ReadTimeout; d > 0 {
			r.expiry.Store(time.AfterFunc(d, func() { r.finish(ErrReadTimeout) }))
		}

		index, err := n.confirmReadIndex(r)
		if errors.Is(err, ErrStopped) {
			return
		}
		if err != nil {
			r.finish(err) // abandoned (nobody waits), or raft refused
			continue
		}
		r.index = index
		n.appliedWaits.wait(r)
	}
}

// errRoundAbandoned ends a round whose callers all gave up.
var errRoundAbandoned = errors.New("read round abandoned")

// readRequestCtxLen is the size of a ReadIndex request context: the member
// ID, then a sequence number, both big-endian.
//
// The leader's raft keys pending ReadIndex requests by their context, and
// silently drops a request whose context is already pending. Every member
// sends its requests to the same leader, so a context must be unique
// across members, not only within one: with a bare per-member counter,
// members whose counters coincide lose requests to each other, and a read
// behind a lost request waits a whole retry interval (half an election
// timeout) for nothing: on a busy cluster that was the tail latency of
// linearizable reads.
//
// For member 0x2f1c, sequence 7:
//
//	00 00 00 00 00 00 2f 1c  00 00 00 00 00 00 00 07
const readRequestCtxLen = 16

func encodeReadRequestCtx(member, seq uint64) [readRequestCtxLen]byte {
	var rctx [readRequestCtxLen]byte
	binary.BigEndian.PutUint64(rctx[:8], member)
	binary.BigEndian.PutUint64(rctx[8:], seq)
	return rctx
}

// decodeReadRequestCtx reads a context made by encodeReadRequestCtx; ok is
// false for any other.
func decodeReadRequestCtx(rctx []byte) (member, seq uint64, ok bool) {
	if len(rctx) != readRequestCtxLen {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(rctx[:8]), binary.BigEndian.Uint64(rctx[8:]), true
}

// answersRound reports whether a read state answers a request this member
// sent at or after sequence number first.
func (n *Node) answersRound(rs raft.ReadState, first uint64) bool {
	member, seq, ok := decodeReadRequestCtx(rs.RequestCtx)
	return ok && member == n.cfg.ID && seq >= first
}

// confirmReadIndex asks raft for the leader's commit index, confirmed by a
// heartbeat quorum, and retries until it gets one: after a retry interval
// (the request or answer may be lost), and at once when a new leader is
// known. Sequence numbers grow monotonically, so any answer to a request
// sent during this round (sequence >= the round's first) was confirmed
// after every caller of the round arrived, and is good for all of them.
func (n *Node) confirmReadIndex(r *readRound) (uint64, error) {
	n.metrics.readIndexRounds.Inc()
	n.readRounds.Add(1)
	leaderChanged := n.leaderChanged.next()
	firstSeq := n.readSeq.Add(1)
	if err := n.sendReadIndex(firstSeq); err != nil {
		return 0, err
	}
	retry := time.NewTimer(n.cfg.readIndexRetry())
	defer retry.Stop()
	for {
		select {
		case rs := <-n.readStates:
			if n.answersRound(rs, firstSeq) {
				return rs.Index, nil
			}
			continue // an answer to an earlier, abandoned round
		case <-leaderChanged:
			leaderChanged = n.leaderChanged.next()
			// etcd fails such a read index (the new leader never saw it);
			// this round asks the new leader instead.
			n.metrics.readIndexesFailed.Inc()
		case <-retry.C:
			// etcd's slow read index: no answer within the retry interval.
			n.metrics.slowReadIndexes.Inc()
		case <-n.stopping:
			return 0, ErrStopped
		case <-r.done:
			return 0, r.err // expired
		}
		n.readMu.Lock()
		abandoned := r.waiters == 0
		n.readMu.Unlock()
		if abandoned {
			return 0, errRoundAbandoned
		}
		if err := n.sendReadIndex(n.readSeq.Add(1)); err != nil {
			return 0, err
		}
		retry.Reset(n.cfg.readIndexRetry())
	}
}

func (n *Node) sendReadIndex(seq uint64) error {
	rctx := encodeReadRequestCtx(n.cfg.ID, seq)
	// Without a leader raft drops the request and the retry asks again.
	if n.ctx.Err() != nil {
		return ErrStopped
	}
	n.raft.with(func(rn *raft.RawNode) { rn.ReadIndex(rctx[:]) })
	return nil
}
