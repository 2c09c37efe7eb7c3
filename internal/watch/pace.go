package watch

import (
	"context"
	"time"
)

// Pacing. Much of a client's work is per response rather than per event
// (decoding a gRPC message, handing it from goroutine to goroutine in
// clientv3), so a stream that sends one response per watcher per change
// can bury its client under messages long before the bytes matter: 1,000
// watchers of a key written 100 times a second are 100,000 responses a
// second. The server cannot see the client fall behind (gRPC's flow
// control windows grow to megabytes of responses already sent), so a
// stream hands out event responses at a bounded rate once a burst is spent
// (a token bucket); the events that keep coming meanwhile join the
// responses still queued (Stream.mergeLocked), and the client gets the
// same events in fewer, larger responses. Below the rate nothing waits.
// Responses without events (created, canceled, progress) take no token,
// but keep their place in the queue.

const (
	defaultResponseRate  = 5000
	defaultResponseBurst = 1000
)

// pacer is a stream's token bucket: one token per event response. Only
// the goroutine calling Stream.Next uses it.
type pacer struct {
	rate   float64 // tokens per second; 0 leaves responses unpaced
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time // time.Now; tests stop the clock
	timer  *time.Timer
}

func newPacer(rate, burst int) pacer {
	return pacer{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: time.Now(), now: time.Now}
}

// refill adds the tokens earned since the last refill.
func (p *pacer) refill(now time.Time) {
	if p.rate == 0 {
		return
	}
	p.tokens = min(p.burst, p.tokens+now.Sub(p.last).Seconds()*p.rate)
	p.last = now
}

// wait is how long until want tokens (at most a burst) are available; 0:
// now. Waiting for a batch rather than for each token keeps a paced
// stream from waking once per response.
func (p *pacer) wait(now time.Time, want int) time.Duration {
	if p.rate == 0 {
		return 0
	}
	p.refill(now)
	need := min(float64(want), p.burst)
	if p.tokens >= need {
		return 0
	}
	return time.Duration((need - p.tokens) / p.rate * float64(time.Second))
}

// take spends a token, if one is available.
func (p *pacer) take() bool {
	if p.rate == 0 {
		return true
	}
	if p.tokens < 1 {
		return false
	}
	p.tokens--
	return true
}

// sleep waits for d, for a wake-up of the stream (its closing), or for
// ctx, whichever comes first.
func (p *pacer) sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) error {
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.timer.C:
		return nil
	case <-wake:
	case <-ctx.Done():
		p.timer.Stop()
		return ctx.Err()
	}
	p.timer.Stop()
	return nil
}

// awaitSendableLocked waits, with s.mu held (released meanwhile), until
// the stream has a response that may be taken now: a response without
// events, or an event response with a token available. It fails with
// ErrClosed once the stream is closed, or with ctx's error.
func (s *Stream) awaitSendableLocked(ctx context.Context) error {
	for {
		if s.closed {
			return ErrClosed
		}
		if head := s.queue.at(s.queue.popped); head != nil {
			wait := s.pace.wait(s.pace.now(), min(s.queue.len(), nextBatch))
			if wait == 0 || len(head.resp.Events) == 0 {
				return nil
			}
			s.mu.Unlock()
			err := s.pace.sleep(ctx, s.wake, wait)
			s.mu.Lock()
			if err != nil {
				return err
			}
			continue
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			s.mu.Lock()
			return ctx.Err()
		}
		s.mu.Lock()
	}
}
