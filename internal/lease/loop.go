package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// rateWindow is the granularity of the revoke and checkpoint rate limits:
// each window allows half a second's worth (etcd's 500 ms lessor tick).
const rateWindow = 500 * time.Millisecond

func revokesPerWindow(ratePerSecond int) int { return max(1, ratePerSecond/2) }

// loopState is the expiry loop's own bookkeeping; only the loop touches it.
type loopState struct {
	windowStart time.Duration
	revokes     int // leases handed to revoke workers in this window
	checkpoints int // checkpoint entries proposed in this window
}

// Start runs the expiry loop: while this lessor is primary it proposes a
// revoke for each expired lease and a checkpoint for each due one. Revokes
// are proposed by revokeWorkers goroutines so one slow proposal does not
// hold up the rest. Start requires Config.Proposer.
func (l *Lessor) Start() error {
	if l.cfg.Proposer == nil {
		return errors.New("lease: Start needs a Proposer")
	}
	l.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel = cancel
		l.wg.Add(1 + revokeWorkers)
		go l.run(ctx)
		for range revokeWorkers {
			go l.revokeWorker(ctx)
		}
	})
	return nil
}

// Stop ends the expiry loop and abandons proposals in flight. Renew calls
// waiting for a revoke return ErrNotPrimary. Safe to call more than once,
// and without Start.
func (l *Lessor) Stop() {
	l.stopOnce.Do(func() {
		close(l.stopc)
		if l.cancel != nil {
			l.cancel()
		}
		l.wg.Wait()
	})
}

func (l *Lessor) run(ctx context.Context) {
	defer l.wg.Done()
	var st loopState
	st.windowStart = l.now()
	for {
		wake, ok := l.tick(ctx, &st)
		var timer Timer
		var timerC <-chan time.Time
		if ok {
			// An absolute deadline: time that passed during the tick
			// (proposals, a slow ConfirmLeadership) shortens the sleep
			// rather than pushing the next window back by that much.
			timer = l.clock.NewTimerAt(l.epoch.Add(wake))
			timerC = timer.C()
		}
		select {
		case <-timerC:
		case <-l.kick:
		case <-l.stopc:
			if timer != nil {
				timer.Stop()
			}
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// tick does the work that is due and returns when to look again (on the
// lessor's clock, like now()); ok is false when nothing is scheduled
// (sleep until kicked).
func (l *Lessor) tick(ctx context.Context, st *loopState) (wake time.Duration, ok bool) {
	now := l.now()
	if now-st.windowStart >= rateWindow {
		st.windowStart, st.revokes, st.checkpoints = now, 0, 0
	}

	// Expired leases, within the revoke budget and the queue's free room
	// (only this goroutine sends to revokeq, so the room cannot shrink).
	budget := min(revokesPerWindow(l.cfg.RevokeRate)-st.revokes, cap(l.revokeq)-len(l.revokeq))
	expired, primary := l.collectExpired(now, budget)
	if !primary {
		return 0, false
	}
	if len(expired) > 0 {
		st.revokes += len(expired)
		if l.cfg.Proposer.ConfirmLeadership(ctx) {
			for _, id := range expired {
				l.revokeq <- id
			}
			l.queued.Add(int64(len(expired)))
		} else {
			// They are retried after ExpiredRetryInterval if this member
			// still leads by then.
			l.log.Warn("not revoking expired leases: leadership not confirmed", "leases", len(expired))
		}
	}

	l.proposeDueCheckpoints(ctx, now, st)
	return l.nextWake(now, st)
}

// collectExpired takes up to limit expired leases from the top of the
// heap. Each is rescheduled ExpiredRetryInterval later, so that it is
// handed out again if its revoke does not apply (it leaves the heap when
// it does).
func (l *Lessor) collectExpired(now time.Duration, limit int) (ids []int64, primary bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.primary {
		return nil, false
	}
	for len(ids) < limit {
		ls := l.expiry.Peek()
		if ls == nil || ls.due > now {
			break
		}
		if ls.expiry <= now {
			ids = append(ids, ls.id)
			ls.due = addSat(now, l.cfg.ExpiredRetryInterval)
		} else {
			ls.due = ls.expiry
		}
		l.expiry.Upsert(ls)
	}
	return ids, true
}

// proposeDueCheckpoints records the remaining TTL of leases whose
// checkpoint is due, in entries of up to maxCheckpointBatch, within the
// checkpoint budget. A failed proposal puts its leases back for a retry.
func (l *Lessor) proposeDueCheckpoints(ctx context.Context, now time.Duration, st *loopState) {
	perWindow := max(1, l.cfg.CheckpointRate/2)
	for st.checkpoints < perWindow {
		cps := l.collectDueCheckpoints(now, maxCheckpointBatch)
		if len(cps) == 0 {
			return
		}
		st.checkpoints++
		if err := l.cfg.Proposer.ProposeCheckpoint(ctx, cps); err != nil {
			if ctx.Err() == nil {
				l.log.Warn("failed to checkpoint lease TTLs", "leases", len(cps), "error", err)
			}
			l.mu.Lock()
			if l.primary {
				retry := addSat(now, l.cfg.ExpiredRetryInterval)
				for _, cp := range cps {
					l.checkpoints.Push(checkpointDue{due: retry, id: cp.ID})
				}
			}
			l.mu.Unlock()
			return
		}
		if len(cps) < maxCheckpointBatch {
			return
		}
	}
}

// collectDueCheckpoints pops due checkpoints of leases that still exist,
// have not expired and have run down below their granted TTL.
func (l *Lessor) collectDueCheckpoints(now time.Duration, limit int) []*pb.LeaseCheckpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.primary {
		return nil
	}
	var cps []*pb.LeaseCheckpoint
	for len(cps) < limit {
		c, ok := l.checkpoints.Peek()
		if !ok || c.due > now {
			break
		}
		l.checkpoints.Pop()
		ls := l.leases[c.id]
		if ls == nil || ls.expiry <= now {
			continue
		}
		remaining := remainingSeconds(ls.expiry - now)
		if remaining >= ls.ttl {
			continue
		}
		cps = append(cps, &pb.LeaseCheckpoint{ID: c.id, Remaining_TTL: remaining})
	}
	return cps
}

// nextWake is when the loop must look again: the earliest due lease or
// checkpoint, or the next window when the budget ran out with work left.
func (l *Lessor) nextWake(now time.Duration, st *loopState) (time.Duration, bool) {
	windowEnd := st.windowStart + rateWindow
	// A source whose work is due now has spent its budget for this window
	// (or, for revokes, filled the queue: a worker finishing kicks the
	// loop sooner); it is looked at again when the next window opens.
	at := func(due time.Duration) time.Duration {
		if due <= now {
			return windowEnd
		}
		return due
	}
	next := forever
	l.mu.RLock()
	if ls := l.expiry.Peek(); ls != nil {
		next = at(ls.due)
	}
	if c, ok := l.checkpoints.Peek(); ok {
		next = min(next, at(c.due))
	}
	l.mu.RUnlock()
	if next == forever {
		return 0, false
	}
	return next, true
}

// revokeWorker proposes the revokes of expired leases, one at a time.
func (l *Lessor) revokeWorker(ctx context.Context) {
	defer l.wg.Done()
	for {
		select {
		case id := <-l.revokeq:
			err := l.cfg.Proposer.ProposeRevoke(ctx, id)
			switch {
			case err == nil:
				l.m.expired.Inc()
			case ctx.Err() != nil:
				return
			default:
				l.log.Warn("failed to revoke expired lease", "lease-id", fmt.Sprintf("%016x", id), "error", err)
			}
			l.wake()
		case <-ctx.Done():
			return
		}
	}
}
