package raftnode

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/host/promreg"
)

// metrics are the node's Prometheus collectors, under etcd 3.6's names,
// types, help texts and buckets where etcd has the same quantity (so that
// etcd's dashboards and alerts read them unchanged), metastore_* where it
// has none. They exist (and cost a few atomic adds) even when
// Config.Metrics is nil, so that the hot paths never branch on it.
type metrics struct {
	walFsyncSeconds       prometheus.Histogram
	walWriteSeconds       prometheus.Histogram
	walWriteBytes         prometheus.Gauge
	snapshotSaveSeconds   prometheus.Histogram
	snapshotWriteSeconds  prometheus.Histogram
	snapshotFsyncSeconds  prometheus.Histogram
	snapshotApplying      prometheus.Gauge
	proposalsCommitted    prometheus.Gauge
	proposalsApplied      prometheus.Gauge
	proposalsFailed       prometheus.Counter
	leaderChanges         prometheus.Counter
	hasLeader             prometheus.Gauge
	isLeader              prometheus.Gauge
	heartbeatSendFailures prometheus.Counter
	slowReadIndexes       prometheus.Counter
	readIndexesFailed     prometheus.Counter
	readIndexRounds       prometheus.Counter

	// registered are the collectors on the registry, unregistered by
	// Node.Stop so that a member restarted in the same process can
	// register again.
	registered *promreg.Set
}

// etcdDiskBuckets are etcd's buckets for WAL and snapshot fsyncs and
// writes: 1 ms doubling to 8.192 s.
var etcdDiskBuckets = prometheus.ExponentialBuckets(0.001, 2, 14)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "etcd", Subsystem: "server", Name: name, Help: help})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "server", Name: name, Help: help})
	}
	hist := func(namespace, subsystem, name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: etcdDiskBuckets,
		})
	}
	m := &metrics{
		walFsyncSeconds: hist("etcd", "disk", "wal_fsync_duration_seconds",
			"The latency distributions of fsync called by WAL."),
		walWriteSeconds: hist("etcd", "disk", "wal_write_duration_seconds",
			"The latency distributions of write called by WAL."),
		// A gauge, as in etcd (which Adds to it).
		walWriteBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcd", Subsystem: "disk", Name: "wal_write_bytes_total",
			Help: "Total number of bytes written in WAL.",
		}),
		// etcd's snapshotter save: here the state machine snapshot file
		// and the log compaction behind it.
		snapshotSaveSeconds: hist("etcd_debugging", "snap", "save_total_duration_seconds",
			"The total latency distributions of save called by snapshot."),
		// etcd's marshalling of the snapshot: here encoding and writing
		// the image into the file, up to its fsync.
		snapshotWriteSeconds: hist("etcd_debugging", "snap", "save_marshalling_duration_seconds",
			"The marshalling cost distributions of save called by snapshot."),
		snapshotFsyncSeconds: hist("etcd", "snap", "fsync_duration_seconds",
			"The latency distributions of fsync called by snap."),
		snapshotApplying:   gauge("snapshot_apply_in_progress_total", "1 if the server is applying the incoming snapshot. 0 if none."),
		proposalsCommitted: gauge("proposals_committed_total", "The total number of consensus proposals committed."),
		proposalsApplied:   gauge("proposals_applied_total", "The total number of consensus proposals applied."),
		proposalsFailed:    counter("proposals_failed_total", "The total number of failed proposals seen."),
		leaderChanges:      counter("leader_changes_seen_total", "The number of leader changes seen."),
		hasLeader:          gauge("has_leader", "Whether or not a leader exists. 1 is existence, 0 is not."),
		isLeader:           gauge("is_leader", "Whether or not this member is a leader. 1 if is, 0 otherwise."),
		heartbeatSendFailures: counter("heartbeat_send_failures_total",
			"The total number of leader heartbeat send failures (likely overloaded from slow disk)."),
		slowReadIndexes: counter("slow_read_indexes_total",
			"The total number of pending read indexes not in sync with leader's or timed out read index requests."),
		readIndexesFailed: counter("read_indexes_failed_total", "The total number of failed read indexes seen."),
		readIndexRounds: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "read_index_rounds_total",
			Help: "ReadIndex rounds run for linearizable reads (each serves every read waiting when it started).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	registered, err := promreg.Register(reg,
		m.walFsyncSeconds, m.walWriteSeconds, m.walWriteBytes, m.snapshotSaveSeconds, m.snapshotWriteSeconds,
		m.snapshotFsyncSeconds, m.snapshotApplying,
		m.proposalsCommitted, m.proposalsApplied, m.proposalsFailed, m.leaderChanges, m.hasLeader, m.isLeader,
		m.heartbeatSendFailures, m.slowReadIndexes, m.readIndexesFailed, m.readIndexRounds)
	if err != nil {
		return nil, fmt.Errorf("raftnode: register metrics: %w", err)
	}
	m.registered = registered
	return m, nil
}

func (m *metrics) unregister() { m.registered.Unregister() }
