package renewal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaseClient is the one call the Renewer makes; clientv3.Client has it.
type LeaseClient interface {
	KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error)
}

// Config describes the lease a Renewer keeps alive.
type Config struct {
	Client LeaseClient
	Lease  clientv3.LeaseID
	// TTL is the lease's TTL as last granted or renewed.
	TTL time.Duration
	// Sent is the send time of the request that last granted or renewed
	// the lease with TTL (taken before sending it).
	Sent time.Time
	// LockDelay is D; CheckLockDelay must accept it for TTL.
	LockDelay time.Duration
	// Clock is the time source; nil is the system clock.
	Clock Clock
}

// Renewer renews one lease in the background and ends, closing Done, when
// the holder deadline passes without a confirmed renewal, when the server
// says the lease is gone, or when Stop is called. Once ended it never
// renews again, so a holder told of its loss does not keep the lease (and
// the lock) alive behind its back.
type Renewer struct {
	client LeaseClient
	lease  clientv3.LeaseID
	delay  time.Duration
	clock  Clock

	mu   sync.Mutex // guards sent and ttl
	sent time.Time  // send time of the last confirmed renewal
	ttl  time.Duration

	manual chan struct{} // closed by Manual: stop renewing, keep the deadline
	stop   chan struct{} // closed by Stop
	once   sync.Once     // closes stop
	monce  sync.Once     // closes manual
	done   chan struct{} // closed when the loop has ended; err is set
	err    error
}

// Start checks cfg and starts renewing.
func Start(cfg Config) (*Renewer, error) {
	if err := CheckLockDelay(cfg.TTL, cfg.LockDelay); err != nil {
		return nil, err
	}
	clock := cfg.Clock
	if clock == nil {
		clock = systemClock{}
	}
	r := &Renewer{
		client: cfg.Client, lease: cfg.Lease, delay: cfg.LockDelay, clock: clock,
		sent: cfg.Sent, ttl: cfg.TTL,
		manual: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go r.run()
	return r, nil
}

// Deadline is the holder deadline of the last confirmed renewal.
func (r *Renewer) Deadline() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Deadline(r.sent, r.ttl, r.delay)
}

// LockDelay is D.
func (r *Renewer) LockDelay() time.Duration { return r.delay }

// Done is closed when the Renewer has ended; Err then says why.
func (r *Renewer) Done() <-chan struct{} { return r.done }

// Err is nil until Done is closed, then ErrDeadlinePassed, an error
// wrapping ErrLeaseGone, or ErrStopped.
func (r *Renewer) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Stop ends the Renewer (if it has not ended) and waits for it.
func (r *Renewer) Stop() {
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

// Manual stops background renewal but keeps the deadline: from now on
// only RenewOnce moves it.
func (r *Renewer) Manual() { r.monce.Do(func() { close(r.manual) }) }

// RenewOnce renews the lease now, outside the background loop, and moves
// the deadline on success. It returns an error wrapping ErrLeaseGone when
// the server says the lease is gone, and the Renewer's error once it has
// ended (a renewal after the deadline would revive a lease the holder was
// already told is lost).
func (r *Renewer) RenewOnce(ctx context.Context) error {
	if err := r.Err(); err != nil {
		return err
	}
	sent := r.clock.Now()
	resp, err := r.client.KeepAliveOnce(ctx, r.lease)
	if err := r.Err(); err != nil {
		return err
	}
	switch {
	case gone(resp, err):
		return fmt.Errorf("%w: %v", ErrLeaseGone, orNotFound(err))
	case err != nil:
		return fmt.Errorf("renew lease %x: %w", int64(r.lease), err)
	}
	r.confirm(sent, resp.TTL)
	return nil
}

// confirm records a renewal sent at sent and answered with ttl seconds.
func (r *Renewer) confirm(sent time.Time, ttl int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sent.After(r.sent) {
		r.sent = sent
	}
	r.ttl = time.Duration(ttl) * time.Second
}

// state is the last confirmed renewal: its send time and TTL.
func (r *Renewer) state() (time.Time, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent, r.ttl
}

// attemptResult is the outcome of one background KeepAliveOnce.
type attemptResult struct {
	sent time.Time
	resp *clientv3.LeaseKeepAliveResponse
	err  error
}

// run is the background loop: one renewal in flight at most, the next
// one interval after the last confirmed send (RetryDelay after a failure
// or an attempt abandoned at its timeout), and the end at the deadline
// however the attempts are going.
func (r *Renewer) run() {
	var (
		results   chan attemptResult // nil while no attempt is in flight
		cancel    context.CancelFunc = func() {}
		timeoutAt time.Time
		next      time.Time // when the next attempt may start; zero: by interval
		renewing  = true
		manual    = r.manual // nil once seen closed, or it would wake the loop forever
	)
	defer func() { cancel() }()
	for {
		now := r.clock.Now()
		sent, ttl := r.state()
		deadline := Deadline(sent, ttl, r.delay)
		if !now.Before(deadline) {
			r.end(ErrDeadlinePassed)
			return
		}
		wake := deadline.Sub(now)
		if results == nil && renewing {
			at := next
			if at.IsZero() {
				at = sent.Add(renewInterval(ttl, r.delay))
			}
			if !now.Before(at) {
				results, cancel = r.attempt(now)
				timeoutAt = now.Add(max(renewInterval(ttl, r.delay), minAttemptTimeout))
			} else {
				wake = min(wake, at.Sub(now))
			}
		}
		if results != nil && !now.Before(timeoutAt) {
			// Abandoned: its answer, if any, is dropped, and the retry is
			// sent as after a failure.
			cancel()
			results, next = nil, now.Add(RetryDelay)
			wake = min(wake, RetryDelay)
		}
		if results != nil {
			wake = min(wake, timeoutAt.Sub(now))
		}
		timer := r.clock.NewTimer(wake)
		select {
		case <-timer.C():
		case res := <-results:
			timer.Stop()
			cancel()
			results = nil
			if gone(res.resp, res.err) {
				r.end(fmt.Errorf("%w: %v", ErrLeaseGone, orNotFound(res.err)))
				return
			}
			next = time.Time{}
			if res.err != nil {
				next = r.clock.Now().Add(RetryDelay)
			} else {
				r.confirm(res.sent, res.resp.TTL)
			}
		case <-manual:
			timer.Stop()
			renewing, manual = false, nil
		case <-r.stop:
			timer.Stop()
			r.end(ErrStopped)
			return
		}
	}
}

// attempt sends one renewal, sent at now, in the background.
func (r *Renewer) attempt(now time.Time) (chan attemptResult, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	results := make(chan attemptResult, 1)
	go func() {
		resp, err := r.client.KeepAliveOnce(ctx, r.lease)
		results <- attemptResult{sent: now, resp: resp, err: err}
	}()
	return results, cancel
}

// end records why the Renewer ended and closes Done.
func (r *Renewer) end(err error) {
	r.err = err
	close(r.done)
}

// gone reports whether an answer says the lease no longer exists.
func gone(resp *clientv3.LeaseKeepAliveResponse, err error) bool {
	if err != nil {
		return errors.Is(err, rpctypes.ErrLeaseNotFound)
	}
	return resp.TTL <= 0
}

func orNotFound(err error) error {
	if err == nil {
		return rpctypes.ErrLeaseNotFound
	}
	return err
}
