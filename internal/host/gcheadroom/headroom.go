package gcheadroom

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

const (
	// DefaultPercent is the headroom of a large heap, in percent of the
	// live heap.
	DefaultPercent = 50
	// DefaultMinHeadroom is the least headroom, in bytes.
	DefaultMinHeadroom = 32 << 20
	// MaxPercent caps the target the floor alone can ask for: GOGC=100,
	// so that the floor is never more than the live heap.
	MaxPercent = 100

	// liveHeapMetric is the heap the last GC cycle marked live.
	liveHeapMetric = "/gc/heap/live:bytes"
)

// Config sets the policy. Start from DefaultConfig.
type Config struct {
	// Percent is the headroom of a large heap, in percent of the live
	// heap, like GOGC. Must be > 0.
	Percent int
	// MinHeadroom is the least headroom, in bytes.
	MinHeadroom uint64
	// Logger receives the policy's start; nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults documented on the constants.
func DefaultConfig() Config {
	return Config{Percent: DefaultPercent, MinHeadroom: DefaultMinHeadroom}
}

// Validate rejects settings the policy cannot honour.
func (c Config) Validate() error {
	if c.Percent <= 0 {
		return fmt.Errorf("gc headroom percent %d: must be positive", c.Percent)
	}
	return nil
}

// TargetPercent returns the collector target percentage that gives a heap
// of live bytes the headroom max(minHeadroom, live × percent / 100), the
// floor's share capped at MaxPercent.
func TargetPercent(live uint64, percent int, minHeadroom uint64) int {
	floor := 0 // the percentage that gives minHeadroom, capped
	switch {
	case minHeadroom == 0:
	case live == 0 || minHeadroom/live >= MaxPercent/100:
		floor = MaxPercent
	default:
		floor = int(minHeadroom * 100 / live)
	}
	return max(percent, floor)
}

// EnvOverride reports whether the operator set GOGC, in which case the
// policy must not run.
func EnvOverride() (value string, set bool) { return os.LookupEnv("GOGC") }

// Run applies the policy until ctx ends, then restores the target that was
// in effect before. It returns at once, doing nothing, if GOGC is set or
// cfg is invalid (check it first with Validate).
func Run(ctx context.Context, cfg Config) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		log.Error("garbage collector headroom policy not started", "error", err)
		return
	}
	if v, set := EnvOverride(); set {
		log.Info("GOGC is set in the environment; leaving the garbage collector's target alone", "GOGC", v)
		return
	}
	samples := []metrics.Sample{{Name: liveHeapMetric}}
	t := &tuner{
		percent:     cfg.Percent,
		minHeadroom: cfg.MinHeadroom,
		readLive: func() uint64 {
			metrics.Read(samples)
			if samples[0].Value.Kind() != metrics.KindUint64 {
				return 0 // not in this runtime: the floor's cap applies
			}
			return samples[0].Value.Uint64()
		},
		setPercent: debug.SetGCPercent,
		current:    -1,
	}
	previous, target := t.start()
	log.Info("garbage collector headroom policy started",
		"percent", cfg.Percent, "min-headroom-bytes", cfg.MinHeadroom, "target-percent", target)
	<-ctx.Done()
	t.stop(previous)
}

// tuner is the policy's state, with the runtime behind two functions so
// that tests can drive it.
type tuner struct {
	percent     int
	minHeadroom uint64
	readLive    func() uint64
	setPercent  func(int) int // debug.SetGCPercent

	mu      sync.Mutex
	current int  // the target last set; -1 before the first
	stopped bool // no more adjustments, no more re-arming
}

// start sets the first target and arms the per-cycle hook; it returns the
// target in effect before and the one it set.
func (t *tuner) start() (previous, target int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	previous = t.adjustLocked()
	t.armLocked()
	return previous, t.current
}

// stop ends the policy and restores the target it found.
func (t *tuner) stop(previous int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.setPercent(previous)
}

// afterGC runs once a GC cycle has freed the sentinel armLocked
// allocated: /gc/heap/live:bytes then holds what that cycle (or a later
// one) marked, so the target follows the live heap cycle by cycle. A
// sampling timer would not do: a restart's index rebuild allocates
// hundreds of MiB within a second, and a target still computed for the
// nearly empty heap would let all of it pile up before the next sample.
func (t *tuner) afterGC() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.adjustLocked()
	t.armLocked()
}

// armLocked allocates a sentinel nothing references and asks the runtime
// to call afterGC once a cycle has collected it. The sentinel is not
// zero-sized and holds a pointer, so it is neither shared with other
// objects nor batched by the tiny allocator, either of which could delay
// or skip its cleanup.
func (t *tuner) armLocked() {
	sentinel := &struct{ p *int }{}
	runtime.AddCleanup(sentinel, (*tuner).afterGC, t)
}

// adjustLocked sets the target for the current live heap, unless it is
// within a twentieth of the one in effect (re-setting it for every small
// change of the live heap would buy nothing), and returns the target in
// effect before.
func (t *tuner) adjustLocked() int {
	want := TargetPercent(t.readLive(), t.percent, t.minHeadroom)
	if t.current >= 0 && abs(want-t.current)*20 <= t.current {
		return t.current
	}
	before := t.setPercent(want)
	t.current = want
	return before
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
