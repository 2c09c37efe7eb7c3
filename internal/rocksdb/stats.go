package rocksdb

import (
	"log/slog"
	"strings"
	"sync"
	"time"
)

// statsProperties are the integer properties Stats and the periodic log
// report besides the text dumps: whether writes are stalled or slowed
// now, what is queued behind the flushes and compactions, and what the
// block cache holds.
var statsProperties = []string{
	"rocksdb.is-write-stopped",
	"rocksdb.actual-delayed-write-rate",
	"rocksdb.estimate-pending-compaction-bytes",
	"rocksdb.num-running-compactions",
	"rocksdb.num-running-flushes",
	"rocksdb.num-immutable-mem-table",
	"rocksdb.cur-size-all-mem-tables",
	"rocksdb.block-cache-usage",
	"rocksdb.block-cache-pinned-usage",
	"rocksdb.estimate-num-keys",
	"rocksdb.total-sst-files-size",
}

// Stats is one reading of RocksDB's own statistics of the live database.
type Stats struct {
	// Properties holds each of statsProperties (all of them: each is an
	// integer property RocksDB answers).
	Properties map[string]int64
	// DB is the "rocksdb.stats" property: per-level compaction statistics
	// (files, sizes, bytes read and written, write amplification, time),
	// flush and compaction totals, write-stall counts by cause, the block
	// cache's entry statistics, and the DB-wide write, WAL and stall
	// figures, cumulative and since the previous reading.
	DB string
	// Tickers is the "rocksdb.options-statistics" property: RocksDB's
	// tickers (block cache hits and misses by block type, bytes read and
	// written, seeks, stall time) and histograms (get, write, seek,
	// flush and compaction times). Empty unless Options.StatsInterval
	// is set: the statistics object is only created then, as it costs
	// some CPU on every operation.
	Tickers string
}

// Stats reads RocksDB's statistics of the live database. It is cheap
// enough to call every few seconds: RocksDB formats them from counters it
// keeps anyway. Reading "rocksdb.stats" resets its interval figures.
func (b *Backend) Stats() (Stats, error) {
	gen, err := b.acquire()
	if err != nil {
		return Stats{}, err
	}
	defer gen.unref()
	return gen.stats(), nil
}

func (g *generation) stats() Stats {
	s := Stats{Properties: make(map[string]int64, len(statsProperties))}
	for _, name := range statsProperties {
		if v, ok := g.db.GetIntProperty(name); ok {
			s.Properties[name] = int64(v)
		}
	}
	s.DB = g.db.GetProperty("rocksdb.stats")
	s.Tickers = g.db.GetProperty("rocksdb.options-statistics")
	return s
}

// statsLogger logs Stats every Options.StatsInterval until stopped.
type statsLogger struct {
	stop chan struct{}
	done sync.WaitGroup
}

// startStatsLogger starts logging b's statistics every interval, at Info
// level, as one record "rocksdb stats" with the integer properties as
// attributes (the "rocksdb." prefix dropped) and the two text dumps as
// "db_stats" and "tickers".
func startStatsLogger(b *Backend, interval time.Duration) *statsLogger {
	l := &statsLogger{stop: make(chan struct{})}
	l.done.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			s, err := b.Stats()
			if err != nil {
				return // closed
			}
			b.logger.Info("rocksdb stats", s.attrs()...)
		}
	})
	return l
}

// close stops the logger and waits until it has logged its last record.
func (l *statsLogger) close() {
	close(l.stop)
	l.done.Wait()
}

func (s Stats) attrs() []any {
	attrs := make([]any, 0, len(s.Properties)+2)
	for _, name := range statsProperties {
		if v, ok := s.Properties[name]; ok {
			attrs = append(attrs, slog.Int64(strings.TrimPrefix(name, "rocksdb."), v))
		}
	}
	return append(attrs, slog.String("db_stats", s.DB), slog.String("tickers", s.Tickers))
}
