package coordination

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// warmup lets the workload run before the first fault.
	warmup = 3 * time.Second
	// calm separates a healed fault from the next one, once every
	// member is ready again, so the workload is back to normal.
	calm = 3 * time.Second
	// settle lets the workload run on after the last fault for a lease
	// TTL and a calm, so that the leases of holders the fault left behind
	// expire and their waiters get the lock before the run stops.
	settle = leaseTTL + calm
	// readyTimeout bounds the wait for every member after a fault.
	readyTimeout = 60 * time.Second
	// drainTimeout bounds the contenders' last cycle after the run: the
	// longest hold and an unlock call.
	drainTimeout = longHoldMax + unlockWait + 5*time.Second
)

// RunConfig is one run of the suite.
type RunConfig struct {
	// Faults are injected one after the other; with Duration zero each
	// once, in order, otherwise in a random order each round until
	// Duration has passed.
	Faults   []Fault
	Duration time.Duration
	Seed     uint64
	// HistoryFile, when set, receives the history as JSON.
	HistoryFile string
}

// window is the stretch of a run that a fault's harm belongs to: from
// its injection to the end of the calm after every member was ready.
type window struct {
	fault    string
	from, to time.Time
}

// Run starts a 3-member cluster behind peer proxies, runs the workload on
// it, injects the faults, then checks the history. Each fault gets a
// subtest that fails with the violations of its windows; the last line
// logged is the summary.
func Run(t *testing.T, cfg RunConfig) {
	framework.SkipUnlessMetaStore(t, "the HTTP lock service (/v1/lock/)")
	budget := cfg.Duration
	if budget == 0 {
		budget = time.Duration(len(cfg.Faults)) * 3 * cutHold
	}
	ctx, cancel := context.WithTimeout(t.Context(), budget+readyTimeout+drainTimeout+2*time.Minute)
	defer cancel()
	t.Logf("seed %d (rerun with -coord.seed=%d), duration %v, engine %s", cfg.Seed, cfg.Seed, cfg.Duration, framework.EngineName())
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, PeerProxies: true})
	hist := NewHistory()
	w, err := newWorkload(c, hist, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	env := newEnv(t, c, hist)
	faults, err := prepareFaults(ctx, env, cfg.Faults)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Faults = faults
	obsClients, err := newObserverClients(c)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(obsClients)
	obsCtx, stopObserver := context.WithCancel(ctx)
	defer stopObserver()
	observed, err := observeSDKQueues(obsCtx, obsClients, hist)
	if err != nil {
		t.Fatal(err)
	}

	runCtx, stopWorkload := context.WithCancel(ctx)
	defer stopWorkload()
	w.start(runCtx)
	pause(ctx, warmup)
	windows, injectErr := inject(ctx, env, cfg)
	pause(ctx, settle)
	stopWorkload()
	if !w.wait(drainTimeout) {
		t.Logf("some contenders still had a call out %v after the run; the checker counts them unanswered", drainTimeout)
	}
	stopObserver()
	<-observed
	if injectErr != nil {
		t.Fatalf("fault harness: %v", injectErr)
	}
	snap := hist.Snapshot()
	if cfg.HistoryFile != "" {
		if err := writeJSON(cfg.HistoryFile, snap); err != nil {
			t.Errorf("history: %v", err)
		}
	}
	report := Check(snap, CheckConfig{})
	for _, id := range env.aimed {
		t.Logf("struck hold: %s", describeHold(snap, id))
	}
	t.Logf("losses: %s", losses(snap))
	reportByFault(t, report, windows)
	t.Logf("summary: target=%s engine=%s duration=%v operations=%d grants=%d writes=%d refusals=%d faults-injected=%d (%s) min-gap=%v (%s) max-silence=%v max-lock-wait=%v releases=[%s] verdict=%s",
		c.Target(), framework.EngineName(), cfg.Duration, report.Calls, report.Grants, report.Writes, report.Refusals,
		len(windows), countFaults(windows), report.MinGap.Round(time.Microsecond), report.MinGapAt,
		report.MaxSilence.Round(time.Millisecond), report.MaxLockWait.Round(time.Millisecond), strings.Join(report.Releases, " "), report.Verdict())
}

// inject runs the faults as cfg says and returns their windows.
func inject(ctx context.Context, env *Env, cfg RunConfig) ([]window, error) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636f6f72))
	deadline := time.Now().Add(cfg.Duration)
	var windows []window
	for round := 0; ; round++ {
		order := rng.Perm(len(cfg.Faults))
		if cfg.Duration == 0 {
			for i := range order {
				order[i] = i
			}
		}
		for _, i := range order {
			if cfg.Duration > 0 && !time.Now().Before(deadline) {
				return windows, nil
			}
			f := cfg.Faults[i]
			from := time.Now()
			env.T.Logf("fault: %s", f.Name())
			if err := f.Inject(ctx, env); err != nil {
				return windows, fmt.Errorf("%s: %w", f.Name(), err)
			}
			readyCtx, cancel := context.WithTimeout(ctx, readyTimeout)
			err := env.Cluster.WaitReady(readyCtx)
			cancel()
			if err != nil {
				return windows, fmt.Errorf("after %s: %w", f.Name(), err)
			}
			env.T.Logf("fault: %s healed after %v", f.Name(), time.Since(from).Round(time.Millisecond))
			pause(ctx, calm)
			windows = append(windows, window{fault: f.Name(), from: from, to: time.Now()})
			if ctx.Err() != nil {
				return windows, ctx.Err()
			}
		}
		if cfg.Duration == 0 {
			return windows, nil
		}
	}
}

// reportByFault gives each fault a subtest with the violations of its
// windows, and "calm" those outside every window.
func reportByFault(t *testing.T, r Report, windows []window) {
	byFault := map[string][]Violation{}
	var names []string
	for _, w := range windows {
		if _, ok := byFault[w.fault]; !ok {
			byFault[w.fault] = nil
			names = append(names, w.fault)
		}
	}
	names = append(names, "calm")
	for _, v := range r.Violations {
		name := "calm"
		for _, w := range windows {
			if !v.At.Before(w.from) && !v.At.After(w.to) {
				name = w.fault
				break
			}
		}
		byFault[name] = append(byFault[name], v)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			for _, v := range byFault[name] {
				t.Errorf("%s", v)
			}
		})
	}
}

// countFaults says how often each fault was injected.
func countFaults(windows []window) string {
	counts := map[string]int{}
	var order []string
	for _, w := range windows {
		if counts[w.fault] == 0 {
			order = append(order, w.fault)
		}
		counts[w.fault]++
	}
	parts := make([]string, len(order))
	for i, name := range order {
		parts[i] = fmt.Sprintf("%s=%d", name, counts[name])
	}
	return strings.Join(parts, " ")
}

// describeHold says how the hold granted by lock call id ended and when
// the lock was next granted.
func describeHold(s Snapshot, id int) string {
	var h Hold
	found := false
	for _, x := range s.Holds {
		if x.Call == id {
			h, found = x, true
		}
	}
	if !found {
		return fmt.Sprintf("call %d granted nothing", id)
	}
	out := fmt.Sprintf("%s on %s, token %d, planned %v", h.Client, h.Resource, h.Token, h.Planned.Round(time.Millisecond))
	if h.End.IsZero() {
		out += ", never ended"
	} else {
		out += fmt.Sprintf(", ended by %s after %v", h.EndCause, h.End.Sub(h.Granted).Round(time.Millisecond))
		if h.Why != "" {
			out += " (" + h.Why + ")"
		}
	}
	for _, x := range s.Holds {
		if x.Resource == h.Resource && x.Granted.After(h.Granted) {
			return out + fmt.Sprintf("; next grant %v after its grant, to %s (token %d)", x.Granted.Sub(h.Granted).Round(time.Millisecond), x.Client, x.Token)
		}
	}
	return out + "; no later grant"
}

// losses counts the beliefs Lost() ended, by API and reason, and how
// many of them ended within instantLoss of their grant.
func losses(s Snapshot) string {
	counts := map[string]int{}
	instant := 0
	for _, h := range s.Holds {
		if h.EndCause != EndLost {
			continue
		}
		api, _, _ := strings.Cut(h.Resource, "/")
		counts[api+": "+lockNames.ReplaceAllString(h.Why, "lock")]++
		if h.End.Sub(h.Granted) < instantLoss {
			instant++
		}
	}
	var parts []string
	for _, why := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d× %s", counts[why], why))
	}
	return fmt.Sprintf("%d within %v of the grant; %s", instant, instantLoss, strings.Join(parts, "; "))
}

// lockNames matches what the SDK's errors say of one lock (its name and
// token), left out when losses are counted by reason.
var lockNames = regexp.MustCompile(`lock "[^"]*" \(token \d+\)`)

// instantLoss: a lock lost this soon after its grant was barely held.
const instantLoss = 100 * time.Millisecond

// writeJSON writes v to path, indented.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
