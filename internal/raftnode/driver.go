package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// rawRaft is raft's state machine (a raft.RawNode) behind a mutex, driven by
// the raft loop. It replaces raft.Node, whose own goroutine sits between
// every caller and the raft loop: with it a lone put crossed goroutines
// four times more than it needs to (proposal to raft's goroutine and its
// answer back, the Ready to the raft loop, Advance back to raft's
// goroutine, the next Ready with the committed entry to the raft loop
// again). Here a caller steps raft itself under the mutex and wakes the
// raft loop, which takes the Ready, persists it, advances, and finds the
// entry committed by that Advance (a single member commits its own
// durable entry at once) without waiting for anyone.
//
// Lock order: mu is a leaf lock; it is never held across I/O, a channel
// operation or a call out of raft (raft does call Storage under it, which
// takes only MemoryStorage's own lock).
type rawRaft struct {
	mu sync.Mutex
	rn *raft.RawNode
	// wake holds one token when raft may have a new Ready for the raft
	// loop (every state change signals it).
	wake chan struct{}
}

func newRawRaft(rc *raft.Config, peers []raft.Peer) (*rawRaft, error) {
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, err
	}
	if len(peers) > 0 {
		if err := rn.Bootstrap(peers); err != nil {
			return nil, err
		}
	}
	return &rawRaft{rn: rn, wake: make(chan struct{}, 1)}, nil
}

// signal tells the raft loop to look for a Ready.
func (r *rawRaft) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// with runs f on the RawNode under the mutex and wakes the raft loop.
func (r *rawRaft) with(f func(rn *raft.RawNode)) {
	r.mu.Lock()
	f(r.rn)
	r.mu.Unlock()
	r.signal()
}

// ready returns the next Ready, if raft has one. The raft loop alone calls
// it, and calls advance before asking again.
func (r *rawRaft) ready() (raft.Ready, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.rn.HasReady() {
		return raft.Ready{}, false
	}
	return r.rn.Ready(), true
}

// advance tells raft the last Ready is persisted and handed on.
func (r *rawRaft) advance(rd raft.Ready) {
	r.mu.Lock()
	r.rn.Advance(rd)
	r.mu.Unlock()
}

func (r *rawRaft) tick() { r.with(func(rn *raft.RawNode) { rn.Tick() }) }

// errDeadlinePassed ends a proposal's wait for a leader at its deadline;
// it is a context.DeadlineExceeded.
var errDeadlinePassed = fmt.Errorf("proposal deadline passed: %w", context.DeadlineExceeded)

// step hands raft a message from a peer. As raft.Node did, errors are
// dropped: a local message type from the network, a response from a peer
// no longer in the configuration, or a forwarded proposal this member
// cannot take are all ignored by raft's rules (the proposer times out).
func (r *rawRaft) step(m raftpb.Message) {
	r.with(func(rn *raft.RawNode) { _ = rn.Step(m) })
}

// propose runs one proposal step (prop) and, while raft drops proposals
// because no leader is known, or while held says so (a member removed
// from the configuration), waits for a leader change and tries again
// until ctx ends or the deadline (if not zero) passes: raft.Node held
// proposals back the same way. It also tries again every retry: raft can
// lose its leader and find the same one again between two Readys, which
// publishes no leader change. Any other
// refusal (a leader transferring leadership or removed from the
// configuration, too many uncommitted bytes) is returned as raft's error.
func (r *rawRaft) propose(ctx context.Context, deadline time.Time, leaderChanged *broadcast, stopping <-chan struct{}, retry time.Duration, held func() bool, prop func(rn *raft.RawNode) error) error {
	var timer, expiry *time.Timer // made at the first wait
	var expired <-chan time.Time  // expiry's, nil without a deadline
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if expiry != nil {
			expiry.Stop()
		}
	}()
	for {
		changed := leaderChanged.next()
		if !held() {
			var err error
			var lead uint64
			r.with(func(rn *raft.RawNode) {
				err = prop(rn)
				if err != nil {
					lead = rn.BasicStatus().Lead
				}
			})
			if !errors.Is(err, raft.ErrProposalDropped) || lead != raft.None {
				return err
			}
		}
		if timer == nil {
			timer = time.NewTimer(retry)
			if !deadline.IsZero() {
				expiry = time.NewTimer(time.Until(deadline))
				expired = expiry.C
			}
		} else {
			timer.Reset(retry)
		}
		select {
		case <-changed:
		case <-timer.C:
		case <-expired:
			return errDeadlinePassed
		case <-ctx.Done():
			return ctx.Err()
		case <-stopping:
			return raft.ErrStopped
		}
	}
}
