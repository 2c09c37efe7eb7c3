package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// Modes of --auto-compaction-mode.
const (
	ModePeriodic = "periodic"
	ModeRevision = "revision"
)

// revisionInterval is how often revision mode compacts (etcd's
// revInterval; etcd has no flag for it).
const revisionInterval = 5 * time.Minute

// retryDivisor splits a periodic retention into sampling intervals.
const retryDivisor = 10

// Compactable proposes a compaction at rev through Raft.
type Compactable interface {
	Compact(ctx context.Context, rev int64) error
}

// Clock is the time source; tests inject a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config describes one compactor.
type Config struct {
	// Mode is ModePeriodic or ModeRevision.
	Mode string
	// Retention is what ParseRetention returned: a duration for periodic
	// mode, a revision count (as a Duration's integer) for revision mode.
	Retention time.Duration
	// Rev reads the store's current revision.
	Rev func() int64
	// Compact proposes a compaction.
	Compact Compactable
	// IsCompacted reports whether an error means the revision was
	// already compacted (counted as success, as etcd does).
	IsCompacted func(error) bool
	Logger      *slog.Logger
	Clock       Clock // nil: the real clock
}

// ParseRetention parses --auto-compaction-retention as etcd does: a plain
// non-negative integer is hours in periodic mode and revisions in revision
// mode; anything else must be a Go duration ("30m", "1h"), taken as is in
// either mode. 0 disables auto-compaction.
func ParseRetention(mode, retention string) (time.Duration, error) {
	if n, err := strconv.Atoi(retention); err == nil && n >= 0 {
		switch mode {
		case ModeRevision:
			return time.Duration(n), nil
		case ModePeriodic:
			return time.Duration(n) * time.Hour, nil
		case "":
			return 0, errors.New("--auto-compaction-mode is undefined")
		}
		return 0, nil
	}
	d, err := time.ParseDuration(retention)
	if err != nil {
		return 0, fmt.Errorf("error parsing CompactionRetention: %w", err)
	}
	return d, nil
}

// ValidateMode checks --auto-compaction-mode as etcd's config does.
func ValidateMode(mode string) error {
	switch mode {
	case ModePeriodic, ModeRevision:
		return nil
	case "":
		return errors.New("undefined auto-compaction-mode")
	}
	return fmt.Errorf("unknown auto-compaction-mode %q", mode)
}

// Compactor runs one auto-compaction loop. Lock order: mu is a leaf.
type Compactor struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	paused bool
}

// New returns a compactor; Run starts it.
func New(cfg Config) (*Compactor, error) {
	if err := ValidateMode(cfg.Mode); err != nil {
		return nil, err
	}
	if cfg.Retention <= 0 {
		return nil, fmt.Errorf("compactor: retention must be positive, got %v", cfg.Retention)
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IsCompacted == nil {
		cfg.IsCompacted = func(error) bool { return false }
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Compactor{cfg: cfg, ctx: ctx, cancel: cancel, done: make(chan struct{})}, nil
}

// Run starts the loop in its own goroutine.
func (c *Compactor) Run() {
	go func() {
		defer close(c.done)
		if c.cfg.Mode == ModePeriodic {
			c.runPeriodic()
		} else {
			c.runRevision()
		}
	}()
}

// Stop ends the loop and waits for it (and a compaction in flight).
func (c *Compactor) Stop() {
	c.cancel()
	<-c.done
}

// Pause suspends compactions (this member stopped leading).
func (c *Compactor) Pause() { c.setPaused(true) }

// Resume lets compactions go on (this member leads).
func (c *Compactor) Resume() { c.setPaused(false) }

func (c *Compactor) setPaused(p bool) {
	c.mu.Lock()
	c.paused = p
	c.mu.Unlock()
}

func (c *Compactor) isPaused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused
}

// wait blocks for d; false when the compactor stopped, or when it is
// paused at the end of the wait.
func (c *Compactor) wait(d time.Duration) (tick, stopped bool) {
	select {
	case <-c.ctx.Done():
		return false, true
	case <-c.cfg.Clock.After(d):
		return !c.isPaused(), false
	}
}

// periodicIntervals are the sampling interval (P/10, P capped at one hour)
// and the number of samples the window keeps.
func periodicIntervals(period time.Duration) (sample time.Duration, samples int, compactEvery time.Duration) {
	compactEvery = min(period, time.Hour)
	sample = compactEvery / retryDivisor
	return sample, int(period/sample) + 1, compactEvery
}

func (c *Compactor) runPeriodic() {
	period := c.cfg.Retention
	sample, samples, compactEvery := periodicIntervals(period)
	revs := make([]int64, 0, samples)
	lastRev := int64(0)
	lastSuccess := c.cfg.Clock.Now()
	// The first compaction waits a whole retention; later ones the
	// (capped) interval.
	wait := period
	for {
		revs = append(revs, c.cfg.Rev())
		if len(revs) > samples {
			revs = revs[1:] // revs[0] is always the revision of one period ago
		}
		tick, stopped := c.wait(sample)
		if stopped {
			return
		}
		if !tick {
			continue
		}
		rev := revs[0]
		if c.cfg.Clock.Now().Sub(lastSuccess) < wait || rev == lastRev {
			continue
		}
		wait = compactEvery
		log := c.cfg.Logger.With("revision", rev, "compact-period", period)
		log.Info("starting auto periodic compaction")
		start := c.cfg.Clock.Now()
		if err := c.cfg.Compact.Compact(c.ctx, rev); err != nil && !c.cfg.IsCompacted(err) {
			log.Warn("failed auto periodic compaction", "retry-interval", sample, "error", err)
			continue
		}
		log.Info("completed auto periodic compaction", "took", c.cfg.Clock.Now().Sub(start))
		lastRev = rev
		lastSuccess = c.cfg.Clock.Now()
	}
}

func (c *Compactor) runRevision() {
	retention := int64(c.cfg.Retention)
	prev := int64(0)
	for {
		tick, stopped := c.wait(revisionInterval)
		if stopped {
			return
		}
		if !tick {
			continue
		}
		rev := c.cfg.Rev() - retention
		if rev <= 0 || rev == prev {
			continue
		}
		log := c.cfg.Logger.With("revision", rev, "revision-compaction-retention", retention)
		log.Info("starting auto revision compaction")
		start := c.cfg.Clock.Now()
		if err := c.cfg.Compact.Compact(c.ctx, rev); err != nil && !c.cfg.IsCompacted(err) {
			log.Warn("failed auto revision compaction", "retry-interval", revisionInterval, "error", err)
			continue
		}
		prev = rev
		log.Info("completed auto revision compaction", "took", c.cfg.Clock.Now().Sub(start))
	}
}
