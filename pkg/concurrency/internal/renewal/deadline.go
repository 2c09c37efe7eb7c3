// Package renewal keeps one lease alive for a lock holder and tells it,
// on its own clock, when it must assume the lease is gone: the holder
// deadline of docs/coordination-safety.md,
//
//	deadline = s + L·(1 − 2ρ) − D
//
// where s is the local send time of the last renewal the leader confirmed,
// L the lease TTL, ρ the clock-rate drift bound and D the lock delay.
//
// etcd's clientv3.KeepAlive cannot give s: its channel carries responses
// without the send time of the request each answers, and it reports a
// lost lease only after a whole TTL without a response counted from
// receipt, which is later than the leader's own expiry. The Renewer
// therefore renews with one KeepAliveOnce at a time, records the time
// each is sent, and keeps the send time of the last one answered with a
// TTL above zero.
package renewal

import (
	"errors"
	"fmt"
	"time"
)

// Drift is ρ, the bound on how much two clocks' rates may differ.
const Drift = 0.01

// MaxDefaultLockDelay is the lock delay unless the TTL is small: the time
// a holder is given to react to its loss signal (wake the goroutine doing
// the work, abandon or finish an in-flight write) before anybody else can
// be granted the lock. One second covers a scheduling stall of a loaded
// process and a GC pause with a wide margin, while costing a 10 s lock
// only a tenth of its validity.
const MaxDefaultLockDelay = time.Second

// DefaultLockDelay is the lock delay of a lease with TTL ttl: one second,
// capped at a quarter of the TTL so a short lease (etcd's minimum is
// 2 s) keeps three quarters of its validity for renewals to get through.
func DefaultLockDelay(ttl time.Duration) time.Duration {
	return min(MaxDefaultLockDelay, ttl/4)
}

// CheckLockDelay rejects a lock delay that leaves a lease of TTL ttl too
// little validity: renewals, three per validity, must have room to
// succeed, so the delay may take at most half the TTL.
func CheckLockDelay(ttl, delay time.Duration) error {
	if delay < 0 || delay > ttl/2 {
		return fmt.Errorf("lock delay %v must be between 0 and half the lease TTL %v", delay, ttl)
	}
	return nil
}

// Validity is how long after the send of a confirmed renewal the holder
// may go on believing it holds: L·(1 − 2ρ) − D.
func Validity(ttl, delay time.Duration) time.Duration {
	return time.Duration(float64(ttl)*(1-2*Drift)) - delay
}

// Deadline is the holder deadline for a renewal sent at sent.
func Deadline(sent time.Time, ttl, delay time.Duration) time.Time {
	return sent.Add(Validity(ttl, delay))
}

// renewInterval is the pause between a confirmed renewal's send and the
// next renewal: a third of the validity, as etcd renews every TTL/3, so
// two more renewals can fail before the deadline.
func renewInterval(ttl, delay time.Duration) time.Duration {
	return max(Validity(ttl, delay)/3, minRenewInterval)
}

const (
	// minRenewInterval keeps a misconfigured tiny TTL from renewing in a
	// busy loop.
	minRenewInterval = 50 * time.Millisecond
	// RetryDelay is the pause after a failed renewal. It is short: a new
	// leader is elected within a second or two and re-grants every lease a
	// whole TTL, so the first renewal it answers restores the deadline,
	// and each attempt sent later only moves s later.
	RetryDelay = 100 * time.Millisecond
	// minAttemptTimeout bounds an attempt from below when the renewal
	// interval is shorter.
	minAttemptTimeout = 500 * time.Millisecond
)

// The reasons a Renewer ends.
var (
	// ErrDeadlinePassed means no renewal was confirmed within the validity
	// of the last one: the lease may have expired at the leader, or be
	// about to, so the holder must assume it lost whatever the lease holds.
	ErrDeadlinePassed = errors.New("renewal: holder deadline passed without a confirmed renewal")
	// ErrLeaseGone means the server answered that the lease does not exist
	// (it expired or was revoked).
	ErrLeaseGone = errors.New("renewal: the lease expired or was revoked")
	// ErrStopped means Stop was called: not a loss.
	ErrStopped = errors.New("renewal: stopped")
)
