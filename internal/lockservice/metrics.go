package lockservice

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/host/promreg"
)

// Release and abandon reasons (metric labels).
const (
	reasonUnlock     = "unlock"     // /unlock deleted the key
	reasonDisconnect = "disconnect" // the client's connection closed
	reasonLost       = "lost"       // the lease expired or the key vanished
	reasonSuperseded = "superseded" // the same node asked again elsewhere
	reasonShutdown   = "shutdown"   // the member is stopping
	reasonError      = "error"      // the service failed
)

type metrics struct {
	acquisitions prometheus.Counter
	waitSeconds  prometheus.Histogram
	waiting      prometheus.Gauge
	holdSeconds  prometheus.Histogram
	held         prometheus.Gauge
	releases     *prometheus.CounterVec
	abandoned    *prometheus.CounterVec
	outcomes     *prometheus.CounterVec
	failed       *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	buckets := prometheus.ExponentialBuckets(0.001, 4, 10) // 1 ms .. ~4.4 min
	m := &metrics{
		acquisitions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metastore_lock_acquisitions_total",
			Help: "Locks granted by the HTTP lock service.",
		}),
		waitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "metastore_lock_wait_seconds", Buckets: buckets,
			Help: "Time from a /lock request to the lock being granted.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metastore_lock_waiting",
			Help: "/lock requests on this member queued behind another holder.",
		}),
		holdSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "metastore_lock_hold_seconds", Buckets: buckets,
			Help: "Time a lock granted on this member was held.",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metastore_lock_held",
			Help: "Locks currently held through /lock requests on this member.",
		}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metastore_lock_releases_total",
			Help: "Held locks that ended, by reason: unlock, disconnect, lost, superseded, shutdown, error.",
		}, []string{"reason"}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metastore_lock_waits_abandoned_total",
			Help: "Queued requests that left before acquiring, by reason: disconnect, lost, superseded, shutdown, error.",
		}, []string{"reason"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metastore_lock_outcomes_total",
			Help: "Critical-section outcomes reported with /unlock: success or failure.",
		}, []string{"outcome"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metastore_lock_requests_failed_total",
			Help: "Lock service requests answered with an HTTP error, by status code.",
		}, []string{"code"}),
	}
	if reg == nil {
		return m, nil
	}
	if _, err := promreg.Register(reg, m.acquisitions, m.waitSeconds, m.waiting, m.holdSeconds,
		m.held, m.releases, m.abandoned, m.outcomes, m.failed); err != nil {
		return nil, err
	}
	return m, nil
}
