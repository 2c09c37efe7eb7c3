package lease

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/host/promreg"
)

// metrics are etcd's lease metrics, under etcd's names so existing
// dashboards work.
type metrics struct {
	granted prometheus.Counter
	revoked prometheus.Counter
	renewed prometheus.Counter
	expired prometheus.Counter
	ttls    prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		granted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "etcd_debugging", Subsystem: "lease", Name: "granted_total",
			Help: "The total number of granted leases.",
		}),
		revoked: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "etcd_debugging", Subsystem: "lease", Name: "revoked_total",
			Help: "The total number of revoked leases.",
		}),
		renewed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "etcd_debugging", Subsystem: "lease", Name: "renewed_total",
			Help: "The number of renewed leases seen by the leader.",
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "etcd_debugging", Subsystem: "server", Name: "lease_expired_total",
			Help: "The total number of expired leases.",
		}),
		ttls: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcd_debugging", Subsystem: "lease", Name: "ttl_total",
			Help: "Bucketed histogram of lease TTLs.",
			// 1 second to about 3 months.
			Buckets: prometheus.ExponentialBuckets(1, 2, 24),
		}),
	}
	if reg == nil {
		return m, nil
	}
	if _, err := promreg.Register(reg, m.granted, m.revoked, m.renewed, m.expired, m.ttls); err != nil {
		return nil, fmt.Errorf("lease: register metrics: %w", err)
	}
	return m, nil
}
