package transport

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/host/promreg"
)

// metrics are the transport's Prometheus collectors: etcd 3.6's
// etcd_network_* family (rafthttp) under etcd's names, labels (To, From,
// Local, Remote: member IDs in hex) and buckets, plus the message counts,
// which etcd does not have, as metastore_network_*. They exist even when
// Config.Metrics is nil so that the hot paths never branch on it; per-peer
// children are looked up once per peer (or per incoming stream), so
// counting a message is one atomic add.
type metrics struct {
	local string // this member's ID, the Local label

	sentBytes        *prometheus.CounterVec
	receivedBytes    *prometheus.CounterVec
	sentFailures     *prometheus.CounterVec
	receivedFailures *prometheus.CounterVec
	sentMessages     *prometheus.CounterVec
	receivedMessages *prometheus.CounterVec
	roundTrip        *prometheus.HistogramVec
	activePeers      *prometheus.GaugeVec
	disconnected     *prometheus.CounterVec

	snapshotSent          *prometheus.CounterVec
	snapshotSendFailures  *prometheus.CounterVec
	snapshotSendInflight  *prometheus.GaugeVec
	snapshotSendSeconds   *prometheus.HistogramVec
	snapshotReceived      *prometheus.CounterVec
	snapshotRecvFailures  *prometheus.CounterVec
	snapshotRecvInflight  *prometheus.GaugeVec
	snapshotReceiveSecond *prometheus.HistogramVec
	// The image received from the leader, stored (etcd's .snap.db).
	snapshotDBSaveSeconds  prometheus.Histogram
	snapshotDBFsyncSeconds prometheus.Histogram

	// registered are the collectors on the registry, unregistered on
	// Stop so that another transport can register on it.
	registered *promreg.Set
}

// snapshotBuckets are etcd's: 100 ms doubling to 51.2 s.
var snapshotBuckets = prometheus.ExponentialBuckets(0.1, 2, 10)

func newMetrics(reg prometheus.Registerer, local uint64) (*metrics, error) {
	opts := func(ns, name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: ns, Subsystem: "network", Name: name, Help: help}
	}
	counter := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(opts("etcd", name, help), []string{label})
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("etcd", name, help)), labels)
	}
	histogram := func(name, help, label string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "etcd", Subsystem: "network", Name: name, Help: help, Buckets: buckets,
		}, []string{label})
	}
	m := &metrics{
		local:            idString(local),
		sentBytes:        counter("peer_sent_bytes_total", "The total number of bytes sent to peers.", "To"),
		receivedBytes:    counter("peer_received_bytes_total", "The total number of bytes received from peers.", "From"),
		sentFailures:     counter("peer_sent_failures_total", "The total number of send failures from peers.", "To"),
		receivedFailures: counter("peer_received_failures_total", "The total number of receive failures from peers.", "From"),
		sentMessages: prometheus.NewCounterVec(opts("metastore", "peer_sent_messages_total",
			"Raft messages written to each peer's stream."), []string{"To"}),
		receivedMessages: prometheus.NewCounterVec(opts("metastore", "peer_received_messages_total",
			"Raft messages read from each peer's stream."), []string{"From"}),
		// 0.1 ms doubling to 3.2768 s, as etcd.
		roundTrip: histogram("peer_round_trip_time_seconds", "Round-Trip-Time histogram between peers", "To",
			prometheus.ExponentialBuckets(0.0001, 2, 16)),
		activePeers:  gauge("active_peers", "The current number of active peer connections.", "Local", "Remote"),
		disconnected: prometheus.NewCounterVec(opts("etcd", "disconnected_peers_total", "The total number of disconnected peers."), []string{"Local", "Remote"}),

		snapshotSent:         counter("snapshot_send_success", "Total number of successful snapshot sends", "To"),
		snapshotSendFailures: counter("snapshot_send_failures", "Total number of snapshot send failures", "To"),
		snapshotSendInflight: gauge("snapshot_send_inflights_total", "Total number of inflight snapshot sends", "To"),
		snapshotSendSeconds: histogram("snapshot_send_total_duration_seconds", "Total latency distributions of v3 snapshot sends",
			"To", snapshotBuckets),
		snapshotReceived:     counter("snapshot_receive_success", "Total number of successful snapshot receives", "From"),
		snapshotRecvFailures: counter("snapshot_receive_failures", "Total number of snapshot receive failures", "From"),
		snapshotRecvInflight: gauge("snapshot_receive_inflights_total", "Total number of inflight snapshot receives", "From"),
		snapshotReceiveSecond: histogram("snapshot_receive_total_duration_seconds", "Total latency distributions of v3 snapshot receives",
			"From", snapshotBuckets),
		snapshotDBSaveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcd", Subsystem: "snap_db", Name: "save_total_duration_seconds",
			Help:    "The total latency distributions of v3 snapshot save",
			Buckets: snapshotBuckets,
		}),
		snapshotDBFsyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcd", Subsystem: "snap_db", Name: "fsync_duration_seconds",
			Help:    "The latency distributions of fsyncing .snap.db file",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
	}
	if reg == nil {
		return m, nil
	}
	registered, err := promreg.Register(reg,
		m.sentBytes, m.receivedBytes, m.sentFailures, m.receivedFailures, m.sentMessages, m.receivedMessages,
		m.roundTrip, m.activePeers, m.disconnected,
		m.snapshotSent, m.snapshotSendFailures, m.snapshotSendInflight, m.snapshotSendSeconds,
		m.snapshotReceived, m.snapshotRecvFailures, m.snapshotRecvInflight, m.snapshotReceiveSecond,
		m.snapshotDBSaveSeconds, m.snapshotDBFsyncSeconds)
	if err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			return nil, fmt.Errorf("transport: register metrics (another transport still registered on this registry?): %w", err)
		}
		return nil, fmt.Errorf("transport: register metrics: %w", err)
	}
	m.registered = registered
	return m, nil
}

func (m *metrics) unregister() { m.registered.Unregister() }

// peerMetrics are one peer's children of the outgoing collectors.
type peerMetrics struct {
	sentBytes    prometheus.Counter
	sentMessages prometheus.Counter
	dropped      prometheus.Counter
	roundTrip    prometheus.Observer
	active       prometheus.Gauge
	disconnected prometheus.Counter
}

func (m *metrics) forPeer(label string) peerMetrics {
	return peerMetrics{
		sentBytes:    m.sentBytes.WithLabelValues(label),
		sentMessages: m.sentMessages.WithLabelValues(label),
		dropped:      m.sentFailures.WithLabelValues(label),
		roundTrip:    m.roundTrip.WithLabelValues(label),
		active:       m.activePeers.WithLabelValues(m.local, label),
		disconnected: m.disconnected.WithLabelValues(m.local, label),
	}
}

// forgetPeer deletes a removed peer's series so that they do not linger.
func (m *metrics) forgetPeer(label string) {
	for _, v := range []*prometheus.CounterVec{
		m.sentBytes, m.sentMessages, m.sentFailures, m.receivedBytes, m.receivedMessages, m.receivedFailures,
		m.snapshotSent, m.snapshotSendFailures, m.snapshotReceived, m.snapshotRecvFailures,
	} {
		v.DeleteLabelValues(label)
	}
	m.roundTrip.DeleteLabelValues(label)
	m.snapshotSendSeconds.DeleteLabelValues(label)
	m.snapshotReceiveSecond.DeleteLabelValues(label)
	m.snapshotSendInflight.DeleteLabelValues(label)
	m.snapshotRecvInflight.DeleteLabelValues(label)
	m.activePeers.DeleteLabelValues(m.local, label)
	m.disconnected.DeleteLabelValues(m.local, label)
}
