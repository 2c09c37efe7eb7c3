package kvstore

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/host/promreg"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// metrics are the store's collectors under etcd 3.6's mvcc and backend
// names (etcd_mvcc_*, etcd_debugging_mvcc_*, etcd_disk_backend_commit_*),
// types and buckets. Counters are plain prometheus counters (an atomic
// add); the gauges of the store's state are read from the current image
// at scrape time, so the request paths pay nothing for them. They exist
// even when Options.Metrics is nil, so that no path branches on it.
type metrics struct {
	ranges, puts, deletes, txns prometheus.Counter
	putBytes                    prometheus.Gauge // a gauge in etcd (which Adds to it)
	commitSeconds               prometheus.Histogram
	hashSeconds, hashRevSeconds prometheus.Histogram
	indexCompactionPauseMs      prometheus.Histogram
	compactionPauseMs           prometheus.Histogram
	compactionTotalMs           prometheus.Histogram
	compactionLast              prometheus.Gauge
	compactionKeys              prometheus.Counter
}

func newMetrics(s *Store, reg prometheus.Registerer) (*metrics, error) {
	counter := func(ns, name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "mvcc", Name: name, Help: help})
	}
	histogram := func(ns, sub, name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help, Buckets: buckets})
	}
	m := &metrics{
		ranges:  counter("etcd", "range_total", "Total number of ranges seen by this member."),
		puts:    counter("etcd", "put_total", "Total number of puts seen by this member."),
		deletes: counter("etcd", "delete_total", "Total number of deletes seen by this member."),
		txns:    counter("etcd", "txn_total", "Total number of txns seen by this member."),
		putBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "etcd_debugging", Subsystem: "mvcc",
			Name: "total_put_size_in_bytes", Help: "The total size of put kv pairs seen by this member."}),
		// The commit of each applied batch to the storage engine (etcd's
		// bbolt commit): 1 ms doubling to 8.192 s.
		commitSeconds: histogram("etcd", "disk", "backend_commit_duration_seconds",
			"The latency distributions of commit called by backend.", prometheus.ExponentialBuckets(0.001, 2, 14)),
		hashSeconds: histogram("etcd", "mvcc", "hash_duration_seconds",
			"The latency distribution of storage hash operation.", prometheus.ExponentialBuckets(.01, 2, 15)),
		hashRevSeconds: histogram("etcd", "mvcc", "hash_rev_duration_seconds",
			"The latency distribution of storage hash by revision operation.", prometheus.ExponentialBuckets(.01, 2, 15)),
		indexCompactionPauseMs: histogram("etcd_debugging", "mvcc", "index_compaction_pause_duration_milliseconds",
			"Bucketed histogram of index compaction pause duration.", prometheus.ExponentialBuckets(0.5, 2, 14)),
		compactionPauseMs: histogram("etcd_debugging", "mvcc", "db_compaction_pause_duration_milliseconds",
			"Bucketed histogram of db compaction pause duration.", prometheus.ExponentialBuckets(1, 2, 13)),
		compactionTotalMs: histogram("etcd_debugging", "mvcc", "db_compaction_total_duration_milliseconds",
			"Bucketed histogram of db compaction total duration.", prometheus.ExponentialBuckets(100, 2, 14)),
		compactionLast: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "etcd_debugging", Subsystem: "mvcc",
			Name: "db_compaction_last", Help: "The unix time of the last db compaction. Resets to 0 on start."}),
		compactionKeys: counter("etcd_debugging", "db_compaction_keys_total", "Total number of db keys compacted."),
	}
	if reg == nil {
		return m, nil
	}
	gauge := func(ns, name, help string, read func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: "mvcc", Name: name, Help: help}, read)
	}
	collectors := []prometheus.Collector{
		m.ranges, m.puts, m.deletes, m.txns, m.putBytes, m.commitSeconds, m.hashSeconds, m.hashRevSeconds,
		m.indexCompactionPauseMs, m.compactionPauseMs, m.compactionTotalMs, m.compactionLast, m.compactionKeys,
		gauge("etcd", "db_total_size_in_bytes", "Total size of the underlying database physically allocated in bytes.",
			func() float64 { return float64(s.Size()) }),
		gauge("etcd", "db_total_size_in_use_in_bytes", "Total size of the underlying database logically in use in bytes.",
			func() float64 { return float64(s.SizeInUse()) }),
		gauge("etcd", "db_open_read_transactions", "The number of currently open read transactions",
			s.openReads),
		gauge("etcd_debugging", "keys_total", "Total number of keys.",
			func() float64 { return float64(s.current.Load().liveKeys) }),
		gauge("etcd_debugging", "current_revision", "The current revision of store.",
			func() float64 { return float64(s.Rev()) }),
		gauge("etcd_debugging", "compact_revision", "The revision of the last compaction in store.",
			func() float64 { return float64(s.CompactRev()) }),
	}
	if _, err := promreg.Register(reg, collectors...); err != nil {
		return nil, fmt.Errorf("kvstore: register metrics: %w", err)
	}
	return m, nil
}

// openReads is the number of readers holding the current image: its
// reference count less the store's own.
func (s *Store) openReads() float64 {
	return float64(max(s.current.Load().refs.Load()-1, 0))
}

// countTxn counts a txn's operations as etcd's metrics txn does: every
// range, put and delete on the path taken (nested txns included), every
// compare evaluated (etcd reads the key for each, a range), and one txn
// when there was more than one operation.
func (m *metrics) countTxn(req *etcdserverpb.TxnRequest, path []bool, resp *etcdserverpb.TxnResponse) {
	ranges, _ := comparesOnPath(req, path)
	var puts, deletes int
	countResponseOps(resp, &ranges, &puts, &deletes)
	m.countOps(ranges, puts, deletes)
}

// comparesOnPath counts the compares compareToPath evaluated for path, in
// its depth-first order, and returns the part of path it did not use.
func comparesOnPath(req *etcdserverpb.TxnRequest, path []bool) (n int, rest []bool) {
	if len(path) == 0 {
		return 0, nil
	}
	n, rest = len(req.GetCompare()), path[1:]
	for _, op := range branch(req, path[0]) {
		if tv, ok := op.GetRequest().(*etcdserverpb.RequestOp_RequestTxn); ok {
			var m int
			m, rest = comparesOnPath(tv.RequestTxn, rest)
			n += m
		}
	}
	return n, rest
}

func (m *metrics) countOps(ranges, puts, deletes int) {
	if ranges+puts+deletes > 1 {
		m.txns.Inc()
	}
	if ranges > 0 {
		m.ranges.Add(float64(ranges))
	}
	if puts > 0 {
		m.puts.Add(float64(puts))
	}
	if deletes > 0 {
		m.deletes.Add(float64(deletes))
	}
}

func countResponseOps(resp *etcdserverpb.TxnResponse, ranges, puts, deletes *int) {
	for _, op := range resp.GetResponses() {
		switch r := op.GetResponse().(type) {
		case *etcdserverpb.ResponseOp_ResponseRange:
			*ranges++
		case *etcdserverpb.ResponseOp_ResponsePut:
			*puts++
		case *etcdserverpb.ResponseOp_ResponseDeleteRange:
			*deletes++
		case *etcdserverpb.ResponseOp_ResponseTxn:
			countResponseOps(r.ResponseTxn, ranges, puts, deletes)
		}
	}
}

func milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// observeCompactionStep records one step of a compaction, which removed
// revisions and took took with writes paused (it runs on the apply
// goroutine): etcd's pause of one delete batch.
func (m *metrics) observeCompactionStep(took time.Duration, removed int) {
	m.compactionPauseMs.Observe(milliseconds(took))
	m.compactionKeys.Add(float64(removed))
}

// observeCompactionFinished records a finished compaction: paused is the
// time its steps spent on the key index, total the time from the
// schedule to the last step.
func (m *metrics) observeCompactionFinished(paused, total time.Duration) {
	m.indexCompactionPauseMs.Observe(milliseconds(paused))
	m.compactionTotalMs.Observe(milliseconds(total))
	m.compactionLast.Set(float64(time.Now().Unix()))
}
