package transport

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the transport's Prometheus collectors, named after etcd's
// etcd_network_* family. They exist even when Config.Metrics is nil so
// that the hot paths never branch on it; per-peer children are looked up
// once per peer (or per incoming stream), so counting a message is one
// atomic add.
type metrics struct {
	sentBytes        *prometheus.CounterVec
	receivedBytes    *prometheus.CounterVec
	sentMessages     *prometheus.CounterVec
	receivedMessages *prometheus.CounterVec
	dropped          *prometheus.CounterVec
	snapshotSend     *prometheus.HistogramVec
	snapshotReceive  *prometheus.HistogramVec
	roundTrip        *prometheus.HistogramVec
	activePeers      prometheus.Gauge

	reg        prometheus.Registerer
	registered []prometheus.Collector
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counter := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "metastore", Subsystem: "network", Name: name, Help: help,
		}, []string{label})
	}
	m := &metrics{
		sentBytes:        counter("peer_sent_bytes_total", "Bytes of raft messages written to each peer's stream.", "To"),
		receivedBytes:    counter("peer_received_bytes_total", "Bytes of raft messages read from each peer's stream.", "From"),
		sentMessages:     counter("peer_sent_messages_total", "Raft messages written to each peer's stream.", "To"),
		receivedMessages: counter("peer_received_messages_total", "Raft messages read from each peer's stream.", "From"),
		dropped:          counter("peer_sent_failures_total", "Raft messages dropped: peer not connected, queue full, or snapshot not sent.", "To"),
		snapshotSend: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "metastore", Subsystem: "network", Name: "snapshot_send_total_duration_seconds",
			Help:    "Time to stream a snapshot to a peer until it acknowledged (or failed).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}, []string{"To", "Outcome"}),
		snapshotReceive: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "metastore", Subsystem: "network", Name: "snapshot_receive_total_duration_seconds",
			Help:    "Time to receive, store and step a snapshot from a peer (or fail).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}, []string{"From", "Outcome"}),
		roundTrip: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "metastore", Subsystem: "network", Name: "peer_round_trip_time_seconds",
			Help:    "Round trip of a probe request to each peer.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"To"}),
		activePeers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "metastore", Subsystem: "network", Name: "active_peers",
			Help: "Peers whose outgoing message stream is connected.",
		}),
		reg: reg,
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{
		m.sentBytes, m.receivedBytes, m.sentMessages, m.receivedMessages, m.dropped,
		m.snapshotSend, m.snapshotReceive, m.roundTrip, m.activePeers,
	} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				return nil, fmt.Errorf("transport: register metrics (another transport still registered on this registry?): %w", err)
			}
			return nil, fmt.Errorf("transport: register metrics: %w", err)
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

// peerMetrics are one peer's children of the outgoing collectors.
type peerMetrics struct {
	sentBytes    prometheus.Counter
	sentMessages prometheus.Counter
	dropped      prometheus.Counter
	roundTrip    prometheus.Observer
}

func (m *metrics) forPeer(label string) peerMetrics {
	return peerMetrics{
		sentBytes:    m.sentBytes.WithLabelValues(label),
		sentMessages: m.sentMessages.WithLabelValues(label),
		dropped:      m.dropped.WithLabelValues(label),
		roundTrip:    m.roundTrip.WithLabelValues(label),
	}
}

// forgetPeer deletes a removed peer's series so that they do not linger.
func (m *metrics) forgetPeer(label string) {
	m.sentBytes.DeleteLabelValues(label)
	m.sentMessages.DeleteLabelValues(label)
	m.dropped.DeleteLabelValues(label)
	m.roundTrip.DeleteLabelValues(label)
	m.receivedBytes.DeleteLabelValues(label)
	m.receivedMessages.DeleteLabelValues(label)
	m.snapshotSend.DeletePartialMatch(prometheus.Labels{"To": label})
	m.snapshotReceive.DeletePartialMatch(prometheus.Labels{"From": label})
}
