package lock

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Guard makes writes conditional on still holding a lock. A guarded write
// is a single transaction whose condition is "the holder's key exists with
// its original create revision", so it cannot apply after the lock expired,
// however long the holder was paused before sending it.
type Guard struct{ h *Lock }

// Guard returns the guard of this lock.
func (h *Lock) Guard() Guard { return Guard{h: h} }

// Cmp is the guard's condition, for callers composing their own Txn: put it
// in the If together with any other comparisons.
func (g Guard) Cmp() clientv3.Cmp { return g.h.ownerCmp() }

// Token is the fencing token of the guarded lock.
func (g Guard) Token() int64 { return g.h.token }

// Do applies ops in one transaction if the lock is still held. When it is
// not, nothing is applied, Lost is closed and the error wraps
// ErrOwnershipLost; a released handle gets ErrLockNotHeld without a round
// trip.
func (g Guard) Do(ctx context.Context, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	h := g.h
	if h.released.Load() {
		return nil, fmt.Errorf("lock %q: guarded write: %w", h.name, ErrLockNotHeld)
	}
	if err := h.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.reqTimeout)
	defer cancel()
	resp, err := h.client.Txn(ctx).If(g.Cmp()).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("lock %q: guarded write: %w", h.name, err)
	}
	if !resp.Succeeded {
		h.markLost("a guarded write found the key gone or replaced")
		return nil, h.lostErr
	}
	return resp, nil
}
