package etcdcompat

import (
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/host/promreg"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/metastore-io/metastore/internal/cluster/membership"
)

// clientMetrics are the client-facing collectors, under etcd 3.6's names:
// the grpc_server_* family from the same grpc-ecosystem interceptors etcd
// uses (so label sets match), etcd_network_client_grpc_*_bytes_total,
// etcd_network_server_stream_failures_total, etcd_server_client_requests_total,
// the health-check counters, and the version gauges. Children counted on
// request paths are looked up once here, so counting is an atomic add.
type clientMetrics struct {
	grpc          *grpcServerMetrics
	sentBytes     prometheus.Counter
	receivedBytes prometheus.Counter

	watchRecvFailures, watchSendFailures *lazyCounter
	leaseRecvFailures, leaseSendFailures *lazyCounter

	// requests counts client requests by client API version; the
	// versions etcd's clients send are cached (read-only maps after
	// construction), others looked up.
	requests       *prometheus.CounterVec
	unaryByVersion map[string]*lazyCounter
	streamByVer    map[string]*lazyCounter

	healthSuccess, healthFailures prometheus.Counter
	healthCheck                   *prometheus.GaugeVec
	healthChecks                  *prometheus.CounterVec

	reg      prometheus.Registerer
	gatherer prometheus.Gatherer
}

// knownClientAPIVersions are the client-api-version values etcd's Go
// clients of 3.4 to 3.6 send, plus etcd's "unknown" for none.
var knownClientAPIVersions = []string{"3.6", "3.5", "3.4", "unknown"}

func newClientMetrics(reg prometheus.Registerer, gatherer prometheus.Gatherer, extensive bool, member Member) (*clientMetrics, error) {
	counter := func(subsystem, name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "etcd", Subsystem: subsystem, Name: name, Help: help})
	}
	streamFailures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "etcd", Subsystem: "network", Name: "server_stream_failures_total",
		Help: "The total number of stream failures from the local server.",
	}, []string{"Type", "API"})
	m := &clientMetrics{
		// etcd's --metrics=extensive adds grpc_server_handling_seconds.
		grpc:          newGRPCServerMetrics(extensive),
		sentBytes:     counter("network", "client_grpc_sent_bytes_total", "The total number of bytes sent to grpc clients."),
		receivedBytes: counter("network", "client_grpc_received_bytes_total", "The total number of bytes received from grpc clients."),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "etcd", Subsystem: "server", Name: "client_requests_total",
			Help: "The total number of client requests per client version.",
		}, []string{"type", "client_api_version"}),
		unaryByVersion: map[string]*lazyCounter{},
		streamByVer:    map[string]*lazyCounter{},
		healthSuccess:  counter("server", "health_success", "The total number of successful health checks"),
		healthFailures: counter("server", "health_failures", "The total number of failed health checks"),
		healthCheck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "etcd", Subsystem: "server", Name: "healthcheck",
			Help: "The result of each kind of healthcheck.",
		}, []string{"type", "name"}),
		healthChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "etcd", Subsystem: "server", Name: "healthchecks_total",
			Help: "The total number of each kind of healthcheck.",
		}, []string{"type", "name", "status"}),
		reg:      reg,
		gatherer: gatherer,
	}
	m.watchRecvFailures = newLazyCounter(streamFailures, "receive", "watch")
	m.watchSendFailures = newLazyCounter(streamFailures, "send", "watch")
	m.leaseRecvFailures = newLazyCounter(streamFailures, "receive", "lease-keepalive")
	m.leaseSendFailures = newLazyCounter(streamFailures, "send", "lease-keepalive")
	for _, v := range knownClientAPIVersions {
		m.unaryByVersion[v] = newLazyCounter(m.requests, "unary", v)
		m.streamByVer[v] = newLazyCounter(m.requests, "stream", v)
	}
	if reg == nil {
		return m, nil
	}
	collectors := []prometheus.Collector{
		m.grpc, m.sentBytes, m.receivedBytes, streamFailures, m.requests,
		m.healthSuccess, m.healthFailures, m.healthCheck, m.healthChecks,
		versionGauge("server", "version", "Which version is running. 1 for 'server_version' label with current version.",
			"server_version", EtcdServerVersion),
		versionGauge("server", "go_version", "Which Go version server is running with. 1 for 'server_go_version' label with current version.",
			"server_go_version", runtime.Version()),
		newClusterVersionCollector(member),
	}
	if _, err := promreg.Register(reg, collectors...); err != nil {
		return nil, fmt.Errorf("etcdcompat: register metrics: %w", err)
	}
	return m, nil
}

// lazyCounter is one child of a CounterVec, created on its first Inc (etcd
// exports a labelled series only once it was counted) and cached from
// then on, so that counting allocates nothing after the first time.
type lazyCounter struct {
	vec    *prometheus.CounterVec
	labels []string
	c      atomic.Pointer[prometheus.Counter]
}

func newLazyCounter(vec *prometheus.CounterVec, labels ...string) *lazyCounter {
	return &lazyCounter{vec: vec, labels: labels}
}

// Inc counts one; a nil counter (services built without metrics, as in
// tests) counts nothing.
func (l *lazyCounter) Inc() {
	if l == nil {
		return
	}
	if c := l.c.Load(); c != nil {
		(*c).Inc()
		return
	}
	c := l.vec.WithLabelValues(l.labels...) // the same child for every caller
	l.c.Store(&c)
	c.Inc()
}

// versionGauge is 1 for one label value, etcd's way of exporting a version.
func versionGauge(subsystem, name, help, label, value string) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "etcd", Subsystem: subsystem, Name: name, Help: help}, []string{label})
	g.WithLabelValues(value).Set(1)
	return g
}

// clusterVersionCollector is etcd_cluster_version: 1 for the member's
// cluster version (major.minor), and 0 for each it reported before, as
// etcd's gauge keeps a label once set: after a downgrade to 3.5,
// {cluster_version="3.5"} 1 and {cluster_version="3.6"} 0. Nothing is
// reported until the version is decided. (etcd forgets the old label
// when it restarts; MetaStore keeps reporting 3.6 at 0 then.)
type clusterVersionCollector struct {
	desc   *prometheus.Desc
	member Member
	// mu guards seen; a leaf, not held while sending.
	mu   sync.Mutex
	seen []string
}

func newClusterVersionCollector(member Member) *clusterVersionCollector {
	return &clusterVersionCollector{
		desc: prometheus.NewDesc("etcd_cluster_version",
			"Which version is running. 1 for 'cluster_version' label with current cluster version", []string{"cluster_version"}, nil),
		member: member,
	}
}

func (c *clusterVersionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *clusterVersionCollector) Collect(ch chan<- prometheus.Metric) {
	current := clusterVersionOf(c.member)
	c.mu.Lock()
	if current != clusterVersionNotDecided {
		current = membership.MajorMinor(current)
		// The version a MetaStore cluster starts at is counted as seen
		// once any is decided: a scrape may come only after a
		// downgrade moved it, and etcd's gauge would hold it at 0.
		for _, v := range []string{membership.MajorMinor(EtcdClusterVersion), current} {
			if !slices.Contains(c.seen, v) {
				c.seen = append(c.seen, v)
			}
		}
	}
	seen := slices.Clone(c.seen)
	c.mu.Unlock()
	for _, v := range seen {
		value := 0.0
		if v == current {
			value = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, value, v)
	}
}

// countRequest counts a client request as etcd's interceptors do, by the
// values of the client-api-version metadata etcd's clients send
// ("unknown" without it). It fails with etcd's error when the version is
// not valid UTF-8.
func (m *clientMetrics) countRequest(versions []string, stream bool) error {
	ver := "unknown"
	if len(versions) > 0 {
		ver = versions[0]
	}
	if !utf8.ValidString(ver) {
		return rpctypes.ErrGRPCInvalidClientAPIVersion
	}
	cached, kind := m.unaryByVersion, "unary"
	if stream {
		cached, kind = m.streamByVer, "stream"
	}
	if c, ok := cached[ver]; ok {
		c.Inc()
	} else {
		m.requests.WithLabelValues(kind, ver).Inc()
	}
	return nil
}

// recordHealth counts a /health answer.
func (m *clientMetrics) recordHealth(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.healthSuccess.Inc()
	} else {
		m.healthFailures.Inc()
	}
}

// recordCheck records one /livez or /readyz check as etcd does.
func (m *clientMetrics) recordCheck(checkType, name string, err error) {
	if m == nil {
		return
	}
	status, val := "success", 1.0
	if err != nil {
		status, val = "error", 0
	}
	m.healthCheck.WithLabelValues(checkType, name).Set(val)
	m.healthChecks.WithLabelValues(checkType, name, status).Inc()
}

// handler serves /metrics as etcd's promhttp.Handler does, instrumented
// with promhttp_metric_handler_requests_*.
func (m *clientMetrics) handler() http.Handler {
	if m == nil || m.gatherer == nil {
		return promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{})
	}
	h := promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
	if m.reg == nil {
		return h
	}
	return promhttp.InstrumentMetricHandler(m.reg, h)
}
