package watch

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/host/promreg"
)

// metrics are the hub's collectors, named as etcd names the same figures
// so that existing dashboards keep working. The figures that change on
// every response are plain atomics read at scrape time, so delivery pays
// no more than an atomic add for them.
type metrics struct {
	streams  prometheus.Gauge
	watchers prometheus.Gauge
	slow     prometheus.Gauge

	pendingEvents atomic.Int64 // queued in streams, not yet taken
	sentEvents    atomic.Int64 // taken by the streams' clients
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
	}
	if reg == nil {
		return m, nil
	}
	events := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "events_total",
		Help: "Total number of events sent by this member.",
	}, func() float64 { return float64(m.sentEvents.Load()) })
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "pending_events_total",
		Help: "Total number of pending events to be sent.",
	}, func() float64 { return float64(m.pendingEvents.Load()) })
	if _, err := promreg.Register(reg, m.streams, m.watchers, m.slow, events, pending); err != nil {
		return nil, err
	}
	return m, nil
}
