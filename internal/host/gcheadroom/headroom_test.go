package gcheadroom

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/testutil"
)

const mib = 1 << 20

func TestTargetPercent(t *testing.T) {
	tests := []struct {
		live        uint64
		percent     int
		minHeadroom uint64
		want        int
	}{
		{live: 0, percent: 50, minHeadroom: 64 * mib, want: MaxPercent},
		{live: 1 * mib, percent: 50, minHeadroom: 64 * mib, want: MaxPercent}, // 6400%, capped at the live heap
		{live: 20 * mib, percent: 50, minHeadroom: 64 * mib, want: 100},
		{live: 64 * mib, percent: 50, minHeadroom: 64 * mib, want: 100},
		{live: 100 * mib, percent: 50, minHeadroom: 64 * mib, want: 64},
		{live: 128 * mib, percent: 50, minHeadroom: 64 * mib, want: 50},
		{live: 400 * mib, percent: 50, minHeadroom: 64 * mib, want: 50},
		{live: 400 * mib, percent: 80, minHeadroom: 0, want: 80},
		{live: 10 * mib, percent: 2000, minHeadroom: 0, want: 2000}, // an explicit percentage above the cap stands
		{live: 1 * mib, percent: 2000, minHeadroom: 64 * mib, want: 2000},
		{live: 0, percent: 50, minHeadroom: 0, want: 50},
		{live: 1, percent: 50, minHeadroom: 1 << 62, want: MaxPercent}, // no overflow
	}
	for _, tt := range tests {
		if got := TargetPercent(tt.live, tt.percent, tt.minHeadroom); got != tt.want {
			t.Errorf("TargetPercent(%d MiB, %d, %d MiB) = %d, want %d", tt.live/mib, tt.percent, tt.minHeadroom/mib, got, tt.want)
		}
	}
}

// fakeRuntime stands in for the live-heap metric and debug.SetGCPercent.
// The tuner may call it from the runtime's cleanup goroutine.
type fakeRuntime struct {
	live    atomic.Uint64
	percent atomic.Int64
	sets    chan int
}

func newFakeRuntime() *fakeRuntime {
	f := &fakeRuntime{sets: make(chan int, 16)}
	f.percent.Store(100)
	return f
}

func (f *fakeRuntime) tuner() *tuner {
	return &tuner{
		percent: 50, minHeadroom: 64 * mib, current: -1,
		readLive: f.live.Load,
		setPercent: func(p int) int {
			before := f.percent.Swap(int64(p))
			f.sets <- p
			return int(before)
		},
	}
}

func TestTunerFollowsLiveHeap(t *testing.T) {
	f := newFakeRuntime()
	tu := f.tuner()
	f.live.Store(80 * mib)
	if before := tu.adjustLocked(); before != 100 || f.percent.Load() != 80 {
		t.Fatalf("first adjust: before %d, target %d; want 100, 80", before, f.percent.Load())
	}
	// Within a twentieth of 80: left alone.
	f.live.Store(82 * mib) // 78%
	tu.adjustLocked()
	if p := f.percent.Load(); p != 80 {
		t.Fatalf("small change re-set the target to %d", p)
	}
	f.live.Store(400 * mib)
	tu.adjustLocked()
	if p := f.percent.Load(); p != 50 {
		t.Fatalf("large heap: target %d, want 50", p)
	}
	f.live.Store(10 * mib)
	tu.adjustLocked()
	if p := f.percent.Load(); p != 100 {
		t.Fatalf("heap shrank: target %d, want 100 (the floor capped at the live heap)", p)
	}
}

// TestTunerAdjustsAfterEachGC checks the hook: once started, a GC cycle
// makes the tuner read the live heap again and re-set the target.
func TestTunerAdjustsAfterEachGC(t *testing.T) {
	f := newFakeRuntime()
	tu := f.tuner()
	f.live.Store(80 * mib)
	if previous, target := tu.start(); previous != 100 || target != 80 {
		t.Fatalf("start: previous %d, target %d; want 100, 80", previous, target)
	}
	<-f.sets
	for _, tt := range []struct {
		live uint64
		want int
	}{{400 * mib, 50}, {10 * mib, 100}} {
		f.live.Store(tt.live)
		var got int
		testutil.WaitFor(t, 10*time.Second, "an adjustment after a GC cycle", func() bool {
			runtime.GC()
			select {
			case got = <-f.sets:
				return true
			default:
				return false
			}
		})
		if got != tt.want {
			t.Fatalf("live %d MiB: target %d, want %d", tt.live/mib, got, tt.want)
		}
	}
	tu.stop(100)
	if p := <-f.sets; p != 100 {
		t.Fatalf("stop restored %d, want 100", p)
	}
	// A cycle that ends after stop changes nothing.
	f.live.Store(400 * mib)
	tu.afterGC()
	select {
	case p := <-f.sets:
		t.Fatalf("target set to %d after stop", p)
	default:
	}
}

// gogcPercent reads the collector's current target without changing it.
func gogcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// unsetGOGC clears GOGC for the test and restores it afterwards.
func unsetGOGC(t *testing.T) {
	t.Setenv("GOGC", "") // registers the restore
	os.Unsetenv("GOGC")
}

func TestRunSetsTargetAndRestoresIt(t *testing.T) {
	unsetGOGC(t)
	old := debug.SetGCPercent(123)
	defer debug.SetGCPercent(old)
	cfg := DefaultConfig()
	cfg.MinHeadroom = 1 << 40 // always the cap, whatever this process's heap
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, cfg)
	}()
	testutil.WaitFor(t, 10*time.Second, "the policy's target", func() bool { return gogcPercent() == MaxPercent })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if p := gogcPercent(); p != 123 {
		t.Fatalf("target after Run: %d, want the previous 123", p)
	}
}

func TestRunLeavesAnExplicitGOGC(t *testing.T) {
	t.Setenv("GOGC", "80")
	old := debug.SetGCPercent(80)
	defer debug.SetGCPercent(old)
	var logged bytes.Buffer
	cfg := DefaultConfig()
	cfg.MinHeadroom = 1 << 40 // would set MaxPercent if the policy ran
	cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, cfg) // must return at once, its context still live
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		t.Fatal("Run applied its policy although GOGC is set")
	}
	if p := gogcPercent(); p != 80 {
		t.Fatalf("target %d after Run with GOGC=80 set", p)
	}
	if !strings.Contains(logged.String(), "GOGC is set") {
		t.Fatalf("log does not say why the policy is off: %q", logged.String())
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, p := range []int{0, -5} {
		if (Config{Percent: p}).Validate() == nil {
			t.Errorf("percent %d: accepted", p)
		}
	}
}
