package lock

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/host/promreg"
)

// Metrics are the lock metrics of the design: wait time, hold time,
// acquisitions by result (success rate) and renewals by result (renew
// success rate).
type Metrics struct {
	WaitSeconds prometheus.Histogram
	HoldSeconds prometheus.Histogram
	Acquires    *prometheus.CounterVec // result: success, conflict, failure
	Renews      *prometheus.CounterVec // result: success, expired, failure
}

// NewMetrics returns unregistered metrics; Register adds them to a registry.
func NewMetrics() *Metrics {
	buckets := prometheus.ExponentialBuckets(0.001, 4, 10)
	return &Metrics{
		WaitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coord_lock_wait_seconds", Help: "Time spent acquiring a lock.", Buckets: buckets}),
		HoldSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "coord_lock_hold_seconds", Help: "Time a lock was held, until released or found expired.", Buckets: buckets}),
		Acquires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_lock_acquires_total", Help: "Lock acquisitions by result: success, conflict, failure."}, []string{"result"}),
		Renews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_lock_renews_total", Help: "Manual lock renewals by result: success, expired, failure."}, []string{"result"}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	_, err := promreg.Register(reg, m.WaitSeconds, m.HoldSeconds, m.Acquires, m.Renews)
	return err
}
