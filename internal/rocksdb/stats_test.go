package rocksdb

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordLog keeps the messages and attributes of the records it is given.
type recordLog struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *recordLog) WithGroup(string) slog.Handler      { return l }

// statsRecords returns the "rocksdb stats" records logged so far, each as
// its attributes by key.
func (l *recordLog) statsRecords() []map[string]slog.Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range l.records {
		if r.Message != "rocksdb stats" {
			continue
		}
		attrs := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value
			return true
		})
		out = append(out, attrs)
	}
	return out
}

func TestStatsWithoutStatisticsObject(t *testing.T) {
	b := newTestBackend(t)
	putAll(t, b, kv{"a", "1"}, kv{"b", "2"})
	s, err := b.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, want := range []string{"** DB Stats **", "Compaction Stats", "Stalls(count)"} {
		if !strings.Contains(s.DB, want) {
			t.Errorf("DB stats lack %q:\n%s", want, s.DB)
		}
	}
	if s.Tickers != "" {
		t.Errorf("tickers without StatsInterval: %q", s.Tickers)
	}
	for _, name := range statsProperties {
		if _, ok := s.Properties[name]; !ok {
			t.Errorf("property %s not answered", name)
		}
	}
	if v := s.Properties["rocksdb.is-write-stopped"]; v != 0 {
		t.Errorf("is-write-stopped = %d, want 0", v)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := b.Stats(); err != ErrClosed {
		t.Errorf("Stats after Close: %v, want ErrClosed", err)
	}
}

func TestStatsIntervalLogsUntilClose(t *testing.T) {
	log := &recordLog{}
	opts := testOptions(t)
	opts.Logger = slog.New(log)
	opts.StatsInterval = 5 * time.Millisecond
	b, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	value := bytes.Repeat([]byte("v"), 1024)
	for i := range 2000 { // about 2 MiB: several flushes of the 64 KiB memtables
		batch := b.NewBatch()
		batch.Put(fmt.Appendf(nil, "key-%06d", i), value)
		if err := batch.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	}
	view := b.ReadView()
	if _, _, err := view.Get([]byte("key-000001")); err != nil {
		t.Fatalf("Get: %v", err)
	}
	view.Release()

	deadline := time.Now().Add(10 * time.Second)
	for {
		recs := log.statsRecords()
		if n := len(recs); n > 0 {
			last := recs[n-1]
			tickers, db := last["tickers"].String(), last["db_stats"].String()
			if strings.Contains(tickers, "rocksdb.block.cache.hit") &&
				strings.Contains(tickers, "rocksdb.db.write.micros") &&
				strings.Contains(db, "Compaction Stats") &&
				last["block-cache-usage"].Kind() == slog.KindInt64 &&
				strings.Contains(tickers, "rocksdb.flush.write.bytes COUNT : ") &&
				!strings.Contains(tickers, "rocksdb.flush.write.bytes COUNT : 0\n") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stats record with tickers, a flush and compaction stats after 10 s; last: %v", recs[max(len(recs)-1, 0):])
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	n := len(log.statsRecords())
	time.Sleep(50 * time.Millisecond)
	if m := len(log.statsRecords()); m != n {
		t.Errorf("%d stats records logged after Close returned", m-n)
	}
}

func TestStatsIntervalNegativeRefused(t *testing.T) {
	opts := testOptions(t)
	opts.StatsInterval = -time.Second
	if b, err := Open(t.TempDir(), opts); err == nil {
		b.Close()
		t.Fatal("Open with a negative stats interval succeeded")
	}
}
