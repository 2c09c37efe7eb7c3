package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// progressInterval paces the progress lines printed while waiting for the
// leased keys to go.
const progressInterval = 10 * time.Second

// loadSlack is how much earlier than -warmup + -baseline before the
// expiry instant the load starts.
const loadSlack = 500 * time.Millisecond

func (c config) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "leaseexpiry[%s]: %s\n", c.name, fmt.Sprintf(format, args...))
}

// waitUntil blocks until at (a planned phase start) or ctx ends.
func waitUntil(ctx context.Context, at time.Time) error {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// measure runs the whole scenario against one server: grant, attach, load
// through the expiry, and returns the figures.
func measure(ctx context.Context, cfg config, clients []*clientv3.Client, watchCli *clientv3.Client) (*result, error) {
	prefix := "/leaseexpiry/" + cfg.name + "/" + strconv.FormatInt(time.Now().UnixNano(), 10) + "/"
	leasedPrefix, loadPrefix := prefix+"leased/", prefix+"load/"
	r := &result{
		Name: cfg.name, Endpoint: cfg.endpoints, Leases: cfg.leases, KeysPerLease: cfg.keysPerLease,
		TTL: int64(cfg.ttl / time.Second), PutClients: cfg.putClients, BoundSeconds: cfg.bound.Seconds(),
	}

	start := time.Now()
	cfg.logf("granting %d leases to expire at +%v", cfg.leases, cfg.ttl)
	leases, err := grantAligned(ctx, clients, cfg.leases, cfg.setupClients, start.Add(cfg.ttl))
	if err != nil {
		return nil, err
	}
	r.GrantSeconds = time.Since(start).Seconds()
	expiry, lastExpiry := expiryWindow(leases)
	r.ExpirySpread = lastExpiry.Sub(expiry).Seconds()
	cfg.logf("granted in %.1fs; expiries between +%.2fs and +%.2fs", r.GrantSeconds,
		expiry.Sub(start).Seconds(), lastExpiry.Sub(start).Seconds())

	attachStart := time.Now()
	keys := cfg.leases * cfg.keysPerLease
	cfg.logf("attaching %d keys", keys)
	lastRev, err := attachKeys(ctx, clients, leases, leasedPrefix, cfg.keysPerLease, cfg.setupClients, strings.Repeat("v", cfg.leasedValueSize))
	if err != nil {
		return nil, err
	}
	r.AttachSeconds = time.Since(attachStart).Seconds()
	// Half a second of slack lets the warm-up end before the first whole
	// second of the baseline, despite the timer's lateness.
	loadAt := expiry.Add(-cfg.baseline - cfg.warmup - loadSlack)
	if left := time.Until(loadAt); left < 0 {
		return nil, fmt.Errorf("attaching took %.1fs and ended %v before the expiry instant, short of -warmup + -baseline (%v): raise -ttl",
			r.AttachSeconds, time.Until(expiry).Round(time.Millisecond), cfg.warmup+cfg.baseline)
	}
	cfg.logf("attached in %.1fs (revision %d); load starts in %v", r.AttachSeconds, lastRev, time.Until(loadAt).Round(time.Millisecond))
	if err := waitUntil(ctx, loadAt); err != nil {
		return nil, err
	}

	// Seconds of the timeline start at whole seconds before the expiry
	// instant, so one of them starts exactly at it.
	loadStart := time.Now()
	base := int(math.Ceil(expiry.Sub(loadStart).Seconds()))
	origin := expiry.Add(-time.Duration(base) * time.Second)
	tl := newTimeline(origin, time.Duration(base)*time.Second+cfg.bound+cfg.after+5*time.Second)

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	deletions := watchDeletions(watchCtx, watchCli, leasedPrefix, lastRev+1, int64(keys), tl)
	select {
	case <-deletions.created:
	case <-deletions.done:
		return nil, fmt.Errorf("watch not created: %w", deletions.err)
	case <-ctx.Done():
		return nil, fmt.Errorf("watch not created: %w", ctx.Err())
	}
	load := startPutLoad(ctx, clients, loadPrefix, cfg.putClients, cfg.keysPerClient, strings.Repeat("x", cfg.valueSize), tl)
	defer load.stop()
	cfg.logf("load of %d put clients running; waiting for the expiry instant and the deletes", cfg.putClients)

	complete, err := awaitDeletions(ctx, cfg, deletions, stopWatch, load, expiry)
	if err != nil {
		return nil, err
	}
	allGone := cfg.bound
	if complete {
		allGone = deletions.last.Sub(expiry)
		r.AllGone = allGone.Seconds()
	} else {
		r.AllGone = -1
	}
	r.DeletedKeys = deletions.deleted
	if deletions.deleted > 0 {
		r.FirstDeleted = deletions.first.Sub(expiry).Seconds()
	}
	if err := waitUntil(ctx, expiry.Add(allGone+cfg.after)); err != nil {
		return nil, err
	}
	load.stop()
	loadEnd := time.Now()
	r.PutErrors = load.errors.Load()

	count, err := clients[0].Get(ctx, leasedPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("count remaining leased keys: %w", err)
	}
	r.RemainingKeys = count.Count

	baseline, during, after := phaseSeconds(base, cfg.baseline, loadStart.Add(cfg.warmup).Sub(expiry), allGone, loadEnd.Sub(expiry))
	// The baseline's own seconds below half its mean need that mean first.
	r.Baseline = summarise(tl, baseline, summarise(tl, baseline, 0).MeanRPS)
	r.Expiry, r.After = summarise(tl, during, r.Baseline.MeanRPS), summarise(tl, after, r.Baseline.MeanRPS)
	r.Seconds = perSecond(tl, base, baseline[0], after[1], deletions.perSecond)
	return r, nil
}

// awaitDeletions waits until every leased key's delete arrived (true) or
// the bound after the expiry instant passed (false), printing progress.
// When it returns the deletion counter's fields are safe to read.
func awaitDeletions(ctx context.Context, cfg config, deletions *deletionCounter, stopWatch context.CancelFunc, load *putLoad, expiry time.Time) (bool, error) {
	deadline := time.NewTimer(time.Until(expiry.Add(cfg.bound)))
	defer deadline.Stop()
	progress := time.NewTicker(progressInterval)
	defer progress.Stop()
	lastPuts, lastAt := load.puts.Load(), time.Now()
	for {
		select {
		case <-deletions.done:
			if deletions.err != nil {
				return false, deletions.err
			}
			cfg.logf("every leased key deleted %.2fs after the expiry instant", deletions.last.Sub(expiry).Seconds())
			return true, nil
		case now := <-progress.C:
			puts := load.puts.Load()
			cfg.logf("%+.0fs from expiry: %.0f puts/s, %d leased keys deleted", now.Sub(expiry).Seconds(),
				float64(puts-lastPuts)/now.Sub(lastAt).Seconds(), deletions.deletedSoFar.Load())
			lastPuts, lastAt = puts, now
		case <-deadline.C:
			cfg.logf("not every leased key deleted within %v of the expiry instant", cfg.bound)
			// Stop the watch so its goroutine is done with the counter.
			stopWatch()
			return false, awaitStopped(deletions)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// awaitStopped waits for the goroutine of a deletion counter whose watch
// was cancelled.
func awaitStopped(d *deletionCounter) error {
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case <-d.done:
		return nil
	case <-t.C:
		return errors.New("watch on leased keys did not stop within a minute of its cancellation")
	}
}
