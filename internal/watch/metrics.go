package watch

import "github.com/prometheus/client_golang/prometheus"

// metrics are the hub's collectors, named as etcd names the same figures
// so that existing dashboards keep working.
type metrics struct {
	streams  prometheus.Gauge
	watchers prometheus.Gauge
	slow     prometheus.Gauge
	events   prometheus.Counter
	pending  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "watch_stream_total",
			Help: "Total number of watch streams.",
		}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "watcher_total",
			Help: "Total number of watchers.",
		}),
		slow: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "slow_watcher_total",
			Help: "Total number of unsynced slow watchers.",
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "events_total",
			Help: "Total number of events sent by this member.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "pending_events_total",
			Help: "Total number of pending events to be sent.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.streams, m.watchers, m.slow, m.events, m.pending} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
