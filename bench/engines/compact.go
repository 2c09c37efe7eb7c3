package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// timedPut is one put of the concurrent load: when it was sent and when
// its answer came.
type timedPut struct{ start, end time.Time }

// compactUnderLoad runs -clients writers putting random loaded keys, lets
// them run for -baseline, then compacts every revision older than the
// current one (physical: the call returns once the compaction is done)
// while they keep writing, and stops them when it returns. It prints the
// put p99 before the compaction, the p99, slowest put and put rate while
// it ran (every put whose time in flight overlaps it), and its duration.
// A server that stalls writes while it compacts shows it in the slowest
// put.
func compactUnderLoad(ctx context.Context, c config) error {
	clis, closeAll, err := openClients(c)
	if err != nil {
		return err
	}
	defer closeAll()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex // guards puts and loadErr
		puts    []timedPut
		loadErr error
	)
	for w := range max(c.clients, 1) {
		wg.Go(func() {
			cli := clis[w%len(clis)]
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			var mine []timedPut
			for loadCtx.Err() == nil {
				i := rng.IntN(c.keys)
				start := time.Now()
				if _, err := cli.Put(loadCtx, c.key(i), c.value(i)); err != nil {
					if loadCtx.Err() == nil {
						mu.Lock()
						loadErr = fmt.Errorf("put key %d: %w", i, err)
						mu.Unlock()
						stopLoad()
					}
					break
				}
				mine = append(mine, timedPut{start, time.Now()})
			}
			mu.Lock()
			puts = append(puts, mine...)
			mu.Unlock()
		})
	}
	loadStart := time.Now()
	select {
	case <-time.After(c.baseline):
	case <-loadCtx.Done():
	}
	compactStart, compactEnd, err := compactAll(loadCtx, clis[0])
	stopLoad()
	wg.Wait()
	if loadErr != nil {
		return loadErr
	}
	if err != nil {
		return err
	}
	var before, during []time.Duration
	for _, p := range puts {
		switch {
		case p.end.Before(compactStart) && p.start.After(loadStart.Add(time.Second)):
			// A second of warm-up: connections and the first puts.
			before = append(before, p.end.Sub(p.start))
		case p.start.Before(compactEnd) && p.end.After(compactStart):
			during = append(during, p.end.Sub(p.start))
		}
	}
	took := compactEnd.Sub(compactStart)
	fmt.Printf("compact_s=%.2f\n", took.Seconds())
	fmt.Printf("base_put_p99_ms=%.2f\n", ms(percentile(before, 0.99)))
	fmt.Printf("compact_put_p99_ms=%.2f\n", ms(percentile(during, 0.99)))
	fmt.Printf("compact_put_max_ms=%.2f\n", ms(percentile(during, 1)))
	fmt.Printf("compact_put_rps=%.0f\n", float64(len(during))/took.Seconds())
	return nil
}

// compactAll compacts at the current revision and waits until the
// compaction is physically done; it returns when it started and ended.
func compactAll(ctx context.Context, cli *clientv3.Client) (time.Time, time.Time, error) {
	resp, err := cli.Get(ctx, "compact-revision-probe")
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("read the current revision: %w", err)
	}
	start := time.Now()
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("compact at revision %d: %w", resp.Header.Revision, err)
	}
	return start, time.Now(), nil
}

// percentile p (0 < p <= 1) of ds; 0 when ds is empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds))*p+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
