package lease

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// This file is the primary's clock: which leases expire when. It lives
// only on the leader, reads the wall clock, and never changes replicated
// state except by proposing through Raft (loop.go).

// seconds converts a TTL in seconds to a Duration, saturating instead of
// overflowing for absurd values.
func seconds(s int64) time.Duration {
	if s > int64(forever/time.Second) {
		return forever
	}
	return time.Duration(s) * time.Second
}

// addSat is a+b (b >= 0) capped just below forever, so a running clock is
// never mistaken for a stopped one.
func addSat(a, b time.Duration) time.Duration {
	if b >= forever-1-a {
		return forever - 1
	}
	return a + b
}

// startClockLocked (re)starts ls's clock: it expires extend plus its
// effective TTL from now. l.mu must be held for writing.
func (l *Lessor) startClockLocked(ls *leaseState, extend, now time.Duration) {
	ls.expiry = addSat(now, addSat(extend, seconds(ls.effectiveTTL())))
	ls.due = ls.expiry
	l.expiry.Upsert(ls)
}

// scheduleCheckpointLocked schedules ls's next checkpoint if it lives long
// enough to need one (etcd: remaining TTL above the checkpoint interval).
func (l *Lessor) scheduleCheckpointLocked(ls *leaseState, now time.Duration) {
	interval := l.cfg.CheckpointInterval
	if interval < 0 || l.cfg.Proposer == nil {
		return
	}
	if seconds(ls.effectiveTTL()) > interval {
		l.checkpoints.Push(checkpointDue{due: addSat(now, interval), id: ls.id})
	}
}

// wake tells the expiry loop that deadlines changed.
func (l *Lessor) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Promote makes this lessor primary: this member leads and has applied
// every entry of earlier terms. Every lease's clock restarts at its
// checkpointed remaining TTL (or its full TTL) plus extend, normally the
// election timeout, so no lease expires early because leadership moved
// (etcd's Promote). When many leases would then expire within the same
// second, later ones are pushed back so no second sees more than 3/4 of
// RevokeRate expiries, leaving room for leases that expire on their own.
func (l *Lessor) Promote(extend time.Duration) {
	now := l.now()
	l.mu.Lock()
	if !l.primary {
		l.primary = true
		l.demotec = make(chan struct{})
		close(l.promotec)
	}
	l.expiry.Clear()
	l.checkpoints.Clear()
	for _, ls := range l.leases {
		l.startClockLocked(ls, extend, now)
		l.scheduleCheckpointLocked(ls, now)
	}
	l.spreadExpiriesLocked(extend, now)
	n := len(l.leases)
	l.mu.Unlock()
	l.log.Info("lessor promoted", "leases", n, "extend", extend)
	l.wake()
}

// spreadExpiriesLocked pushes back expiries that pile up. Walking leases
// in expiry order, a window opens at the first lease's remaining time;
// the k-th lease of a window beyond the target rate gets a delay of
// k/target seconds measured from the window's start, and the window
// stretches to cover it.
func (l *Lessor) spreadExpiriesLocked(extend, now time.Duration) {
	if len(l.leases) < l.cfg.RevokeRate {
		return // cannot pile up beyond one second of revokes
	}
	all := make([]*leaseState, 0, len(l.leases))
	for _, ls := range l.leases {
		all = append(all, ls)
	}
	slices.SortFunc(all, func(a, b *leaseState) int {
		if c := cmp.Compare(a.expiry, b.expiry); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	target := 3 * l.cfg.RevokeRate / 4
	base := all[0].expiry - now
	next := base + time.Second
	expires := 0
	for _, ls := range all {
		remaining := ls.expiry - now
		if remaining > next {
			base, next, expires = remaining, remaining+time.Second, 1
			continue
		}
		expires++
		if expires <= target {
			continue
		}
		delay := time.Duration(float64(time.Second)*float64(expires)/float64(target)) - (remaining - base)
		next = base + delay
		l.startClockLocked(ls, addSat(delay, extend), now)
	}
}

// Demote stops the clock: this member no longer leads. Leases never expire
// on a non-primary lessor.
func (l *Lessor) Demote() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.primary {
		return
	}
	l.primary = false
	for _, ls := range l.leases {
		ls.expiry = forever
	}
	l.expiry.Clear()
	l.checkpoints.Clear()
	close(l.demotec)
	l.demotec = nil
	l.promotec = make(chan struct{})
	l.log.Info("lessor demoted")
}

// Promoted returns a channel closed while this lessor is primary (a new
// one after each Demote), for callers waiting to renew locally.
func (l *Lessor) Promoted() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.promotec
}

// IsPrimary reports whether this lessor runs the lease clock.
func (l *Lessor) IsPrimary() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.primary
}

// Renew restarts lease id's clock at its full TTL and returns that TTL
// (a keep-alive). Only the primary renews (ErrNotPrimary otherwise). A
// lease that already expired is being revoked: Renew waits for the revoke
// and reports ErrLeaseNotFound, or ErrNotPrimary if leadership is lost
// first. A lease with a checkpointed remaining TTL first clears it through
// Raft, so that a later leader does not start it from the stale remainder.
func (l *Lessor) Renew(ctx context.Context, id int64) (int64, error) {
	l.mu.RLock()
	if !l.primary {
		l.mu.RUnlock()
		return -1, ErrNotPrimary
	}
	demotec := l.demotec
	ls := l.leases[id]
	if ls == nil {
		l.mu.RUnlock()
		return -1, ErrLeaseNotFound
	}
	clearRemaining := ls.remainingTTL > 0 && l.cfg.Proposer != nil && l.cfg.CheckpointInterval >= 0
	expired := ls.expiry <= l.now()
	l.mu.RUnlock()

	if expired {
		l.mu.Lock()
		if ls.revokec == nil {
			ls.revokec = make(chan struct{})
		}
		revokec := ls.revokec
		_, alive := l.leases[id]
		l.mu.Unlock()
		if alive {
			select {
			case <-revokec:
			case <-demotec:
				return -1, ErrNotPrimary
			case <-l.stopc:
				return -1, ErrNotPrimary
			case <-ctx.Done():
				return -1, ctx.Err()
			}
		}
		return -1, ErrLeaseNotFound
	}

	if clearRemaining {
		cp := []*pb.LeaseCheckpoint{{ID: id, Remaining_TTL: 0}}
		if err := l.cfg.Proposer.ProposeCheckpoint(ctx, cp); err != nil {
			return -1, fmt.Errorf("renew lease %016x: clear checkpointed TTL: %w", id, err)
		}
	}

	l.mu.Lock()
	ls = l.leases[id]
	if ls == nil {
		l.mu.Unlock()
		return -1, ErrLeaseNotFound
	}
	if !l.primary {
		l.mu.Unlock()
		return -1, ErrNotPrimary
	}
	l.startClockLocked(ls, 0, l.now())
	ttl := ls.ttl
	l.mu.Unlock()
	l.m.renewed.Inc()
	return ttl, nil
}

// TimeToLive answers LeaseTimeToLive from the primary's clock: seconds
// left (truncated, as etcd), the granted TTL, and with keys the attached
// keys in order. ErrNotPrimary on a non-primary lessor.
func (l *Lessor) TimeToLive(id int64, withKeys bool) (*pb.LeaseTimeToLiveResponse, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if !l.primary {
		return nil, ErrNotPrimary
	}
	ls := l.leases[id]
	if ls == nil {
		return nil, ErrLeaseNotFound
	}
	remaining := ls.expiry - l.now()
	resp := &pb.LeaseTimeToLiveResponse{ID: id, TTL: int64(remaining.Seconds()), GrantedTTL: ls.ttl}
	if withKeys {
		resp.Keys = make([][]byte, 0, len(ls.keys))
		for k := range ls.keys {
			resp.Keys = append(resp.Keys, []byte(k))
		}
		slices.SortFunc(resp.Keys, func(a, b []byte) int { return cmp.Compare(string(a), string(b)) })
	}
	return resp, nil
}

// remainingSeconds is the checkpointed form of a remaining duration:
// whole seconds, rounded up (etcd's math.Ceil).
func remainingSeconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}
