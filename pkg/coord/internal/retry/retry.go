// Package retry runs an operation again after transient failures, with
// exponential backoff: the coord module's RetryConfig.
package retry

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Policy is how often and how far apart attempts are made.
type Policy struct {
	MaxAttempts  int           // attempts in all; < 1 means 1
	InitialDelay time.Duration // pause before the second attempt
	MaxDelay     time.Duration // cap on any pause
	Multiplier   float64       // growth of the pause per attempt (>= 1)
}

// Do runs op until it succeeds, fails with an error that is not
// transient, the attempts are used up or ctx ends. It returns op's last
// error.
func Do(ctx context.Context, p Policy, op func(ctx context.Context) error) error {
	delay := p.InitialDelay
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || attempt >= p.MaxAttempts || !Transient(err) || ctx.Err() != nil {
			return err
		}
		pause := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			pause.Stop()
			return err
		case <-pause.C:
		}
		delay = next(delay, p)
	}
}

// Delays lists the pauses Do makes between the attempts of p.
func Delays(p Policy) []time.Duration {
	var out []time.Duration
	delay := p.InitialDelay
	for attempt := 1; attempt < p.MaxAttempts; attempt++ {
		out = append(out, delay)
		delay = next(delay, p)
	}
	return out
}

func next(delay time.Duration, p Policy) time.Duration {
	m := p.Multiplier
	if m < 1 {
		m = 1
	}
	d := time.Duration(float64(delay) * m)
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	return d
}

// Transient reports whether err is worth another attempt: the connection
// or the cluster had trouble (no leader, timeouts, unavailable). Invalid
// requests, permission errors, conflicts and cancellation are not.
func Transient(err error) bool {
	switch {
	case errors.Is(err, context.Canceled):
		return false
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrLeaderChanged),
		errors.Is(err, rpctypes.ErrTimeout), errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost), errors.Is(err, rpctypes.ErrStopped),
		errors.Is(err, context.DeadlineExceeded):
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded:
		return true
	}
	return false
}
