package rocksdb

import (
	"sync"
	"time"

	"github.com/linxGnu/grocksdb"
)

// compactProgressEvery is how often a running Compact logs its progress.
const compactProgressEvery = 10 * time.Second

// Compact rewrites the whole key space (a manual CompactRange over
// everything, bottommost level included), dropping overwritten and
// deleted entries and range tombstones: Maintenance.Defragment. It blocks
// until done, logging progress every compactProgressEvery, and runs
// alongside reads and commits (automatic compactions keep running too,
// so commits never stall behind it). Concurrent calls run one at a time.
func (b *Backend) Compact() error {
	return b.compact(compactProgressEvery)
}

func (b *Backend) compact(progressEvery time.Duration) error {
	b.compactMu.Lock()
	defer b.compactMu.Unlock()
	gen, err := b.acquire()
	if err != nil {
		return err
	}
	defer gen.unref()

	before, start := gen.size(), time.Now()
	b.logger.Info("rocksdb compaction started", "size", before, "live", gen.intProperty("rocksdb.estimate-live-data-size"))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				b.logger.Info("rocksdb compaction running",
					"elapsed", time.Since(start).Round(time.Millisecond),
					"size", gen.size(),
					"running_compactions", gen.intProperty("rocksdb.num-running-compactions"),
					"pending_bytes", gen.intProperty("rocksdb.estimate-pending-compaction-bytes"))
			}
		}
	})

	opts := grocksdb.NewCompactRangeOptions()
	opts.SetExclusiveManualCompaction(false)
	opts.SetBottommostLevelCompaction(grocksdb.KForceOptimized)
	gen.db.CompactRangeOpt(grocksdb.Range{}, opts) // nil bounds: everything
	opts.Destroy()
	gen.sizes.bump()
	close(done)
	wg.Wait()

	b.logger.Info("rocksdb compaction finished",
		"took", time.Since(start).Round(time.Millisecond),
		"size_before", before, "size_after", gen.size())
	return nil
}
