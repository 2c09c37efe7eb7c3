package raftnode

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the node's Prometheus collectors. They exist (and cost a few
// atomic adds) even when Config.Metrics is nil, so that the hot paths never
// branch on it.
type metrics struct {
	walFsyncSeconds     prometheus.Histogram
	snapshotSaveSeconds prometheus.Histogram
	proposalsCommitted  prometheus.Gauge
	proposalsApplied    prometheus.Gauge
	proposalsPending    prometheus.Gauge
	proposalsFailed     prometheus.Counter
	leaderChanges       prometheus.Counter
	hasLeader           prometheus.Gauge
	isLeader            prometheus.Gauge
	readIndexRounds     prometheus.Counter
	readIndexResends    prometheus.Counter

	// registered are the collectors on reg, unregistered by Node.Stop so
	// that a member restarted in the same process can register again.
	reg        prometheus.Registerer
	registered []prometheus.Collector
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		walFsyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "metastore", Subsystem: "wal", Name: "fsync_duration_seconds",
			Help:    "Latency of WAL fsyncs (one per raft Ready that carries entries or a vote).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		snapshotSaveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "metastore", Subsystem: "snap", Name: "save_duration_seconds",
			Help:    "Time to write a state machine snapshot file and compact the log behind it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		proposalsCommitted: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "proposals_committed_total",
			Help: "Commit index: the number of consensus proposals committed.",
		}),
		proposalsApplied: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "proposals_applied_total",
			Help: "Applied index: the number of committed proposals the state machine holds.",
		}),
		proposalsPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "proposals_pending",
			Help: "Log entries appended but not yet committed.",
		}),
		proposalsFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "proposals_failed_total",
			Help: "Proposals raft did not accept (no leader, dropped, cancelled).",
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "leader_changes_seen_total",
			Help: "Number of leader changes seen.",
		}),
		hasLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "has_leader",
			Help: "1 if a leader is known, else 0.",
		}),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "is_leader",
			Help: "1 if this member is the leader, else 0.",
		}),
		readIndexRounds: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "read_index_rounds_total",
			Help: "ReadIndex rounds run for linearizable reads (each serves every read waiting when it started).",
		}),
		readIndexResends: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "metastore", Subsystem: "raft", Name: "read_index_resends_total",
			Help: "ReadIndex requests sent again because a round got no answer within the retry interval or the leader changed; each delays its round's reads (etcd's slow_read_indexes_total).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	m.reg = reg
	for _, c := range []prometheus.Collector{
		m.walFsyncSeconds, m.snapshotSaveSeconds, m.proposalsCommitted, m.proposalsApplied,
		m.proposalsPending, m.proposalsFailed, m.leaderChanges, m.hasLeader, m.isLeader, m.readIndexRounds,
		m.readIndexResends,
	} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, fmt.Errorf("raftnode: register metrics: %w", err)
		}
		m.registered = append(m.registered, c)
	}
	return m, nil
}

func (m *metrics) unregister() {
	for _, c := range m.registered {
		m.reg.Unregister(c)
	}
	m.registered = nil
}
