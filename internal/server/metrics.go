package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// defaultWarningApplyDuration is etcd's --warning-apply-duration: an apply
// or read slower than this is logged and counted as a slow apply.
const defaultWarningApplyDuration = 100 * time.Millisecond

// applyOp names an applied request as etcd's apply_duration_seconds "op"
// label does.
type applyOp int

const (
	opPut applyOp = iota
	opDeleteRange
	opTxn
	opCompaction
	opLeaseGrant
	opLeaseRevoke
	opLeaseCheckpoint
	opClusterMemberAttrSet
	opClusterVersionSet
	opDowngradeInfoSet
	opUnknown
	numApplyOps
)

var applyOpNames = [numApplyOps]string{
	"Put", "DeleteRange", "Txn", "Compaction", "LeaseGrant", "LeaseRevoke", "LeaseCheckpoint",
	"ClusterMemberAttrSet", "ClusterVersionSet", "DowngradeInfoSet", "unknown",
}

func applyOpOf(req *pb.InternalRaftRequest) applyOp {
	switch {
	case req.Put != nil:
		return opPut
	case req.DeleteRange != nil:
		return opDeleteRange
	case req.Txn != nil:
		return opTxn
	case req.Compaction != nil:
		return opCompaction
	case req.LeaseGrant != nil:
		return opLeaseGrant
	case req.LeaseRevoke != nil:
		return opLeaseRevoke
	case req.LeaseCheckpoint != nil:
		return opLeaseCheckpoint
	case req.ClusterMemberAttrSet != nil:
		return opClusterMemberAttrSet
	case req.ClusterVersionSet != nil:
		return opClusterVersionSet
	case req.DowngradeInfoSet != nil:
		return opDowngradeInfoSet
	}
	return opUnknown
}

// serverMetrics are the member's etcd_server_* collectors that belong to
// no lower layer (raftnode owns the raft ones), under etcd 3.6's names,
// labels and buckets. Label children used on request paths are looked up
// once here, so counting costs an atomic add and no allocation.
type serverMetrics struct {
	proposalsPending prometheus.Gauge
	slowApplies      prometheus.Counter
	// applySeconds[op][success] and rangeSeconds[success] (0 false, 1 true).
	applySeconds      [numApplyOps][2]prometheus.Observer
	rangeSeconds      [2]prometheus.Observer
	promoteSucceeded  prometheus.Counter
	promoteFailed     *prometheus.CounterVec
	warnApplyDuration time.Duration
	// The storage engine's maintenance, under etcd's backend names.
	defragSeconds   prometheus.Histogram
	defragInflight  prometheus.Gauge
	snapshotSeconds prometheus.Histogram
}

// newServerMetrics builds the collectors and registers them with reg (nil:
// none). The gauges read at scrape time read the member's parts passed
// here: learner, this member's id and the member list.
func newServerMetrics(reg prometheus.Registerer, warnApplyDuration time.Duration, id uint64, learner *atomic.Bool, cluster *membership.Cluster) (*serverMetrics, error) {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "etcd", Subsystem: "server", Name: name, Help: help}
	}
	applySec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "etcd", Subsystem: "server", Name: "apply_duration_seconds",
		Help: "The latency distributions of v2 apply called by backend.",
		// 0.1 ms doubling to 52.4288 s, as etcd.
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20),
	}, []string{"version", "op", "success"})
	rangeSec := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "etcd", Subsystem: "server", Name: "range_duration_seconds",
		Help:    "The latency distributions of txn.Range",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20),
	}, []string{"success"})
	m := &serverMetrics{
		proposalsPending: prometheus.NewGauge(prometheus.GaugeOpts(opts("proposals_pending",
			"The current number of pending proposals to commit."))),
		slowApplies: prometheus.NewCounter(prometheus.CounterOpts(opts("slow_apply_total",
			"The total number of slow apply requests (likely overloaded from slow disk)."))),
		promoteSucceeded: prometheus.NewCounter(prometheus.CounterOpts(opts("learner_promote_successes",
			"The total number of successful learner promotions while this member is leader."))),
		promoteFailed: prometheus.NewCounterVec(prometheus.CounterOpts(opts("learner_promote_failures",
			"The total number of failed learner promotions (likely learner not ready) while this member is leader.")),
			[]string{"Reason"}),
		warnApplyDuration: warnApplyDuration,
		defragSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcd", Subsystem: "disk", Name: "backend_defrag_duration_seconds",
			Help:    "The latency distribution of backend defragmentation.",
			Buckets: prometheus.ExponentialBuckets(.1, 2, 13),
		}),
		defragInflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcd", Subsystem: "disk", Name: "defrag_inflight",
			Help: "Whether or not defrag is active on the member. 1 means active, 0 means not.",
		}),
		// From opening a Maintenance.Snapshot image to releasing it.
		snapshotSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcd", Subsystem: "disk", Name: "backend_snapshot_duration_seconds",
			Help:    "The latency distribution of backend snapshots.",
			Buckets: prometheus.ExponentialBuckets(.01, 2, 17),
		}),
	}
	if m.warnApplyDuration <= 0 {
		m.warnApplyDuration = defaultWarningApplyDuration
	}
	for op := range numApplyOps {
		for ok, label := range []string{"false", "true"} {
			m.applySeconds[op][ok] = applySec.WithLabelValues("v3", applyOpNames[op], label)
		}
	}
	m.rangeSeconds = [2]prometheus.Observer{rangeSec.WithLabelValues("false"), rangeSec.WithLabelValues("true")}
	if reg == nil {
		return m, nil
	}
	collectors := []prometheus.Collector{
		m.proposalsPending, m.slowApplies, applySec, rangeSec, m.promoteSucceeded, m.promoteFailed,
		m.defragSeconds, m.defragInflight, m.snapshotSeconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("is_learner", "Whether or not this member is a learner. 1 if is, 0 otherwise.")),
			func() float64 { return boolFloat(learner.Load()) }),
		constGauge(opts("id", "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID."),
			"server_id", fmt.Sprintf("%x", id)),
		newKnownPeersCollector(id, cluster),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "os", Subsystem: "fd", Name: "used",
			Help: "The number of used file descriptors."}, fdUsed),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "os", Subsystem: "fd", Name: "limit",
			Help: "The file descriptor limit."}, fdLimit),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("server: register metrics: %w", err)
		}
	}
	return m, nil
}

// registerAuthRevision exports the auth store's revision
// (etcd_debugging_auth_revision), once the store is open.
func registerAuthRevision(reg prometheus.Registerer, as *auth.Store) error {
	if reg == nil {
		return nil
	}
	err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "etcd_debugging", Subsystem: "auth", Name: "revision",
		Help: "The current revision of auth store."}, func() float64 { return float64(as.Revision()) }))
	if err != nil {
		return fmt.Errorf("server: register metrics: %w", err)
	}
	return nil
}

// observeApply times one applied request, and counts and logs it as etcd
// does when it took longer than --warning-apply-duration.
func (m *serverMetrics) observeApply(log *slog.Logger, op applyOp, err error, took time.Duration) {
	// etcd counts a compacted-revision error as a successful apply.
	ok := err == nil || errors.Is(err, kvstore.ErrCompacted)
	m.applySeconds[op][boolIndex(ok)].Observe(took.Seconds())
	if took > m.warnApplyDuration {
		m.slowApplies.Inc()
		log.Warn("apply request took too long", "took", took, "expected-duration", m.warnApplyDuration,
			"op", applyOpNames[op], "error", err)
	}
}

// observeRange times a read as etcd's range_duration_seconds, and counts
// a slow one as etcd counts slow read-only ranges.
func (m *serverMetrics) observeRange(log *slog.Logger, err error, took time.Duration) {
	m.rangeSeconds[boolIndex(err == nil)].Observe(took.Seconds())
	if took > m.warnApplyDuration {
		m.slowApplies.Inc()
		log.Warn("apply request took too long", "took", took, "expected-duration", m.warnApplyDuration,
			"prefix", "read-only range", "error", err)
	}
}

// observePromote counts a promotion this member decided as leader.
func (m *serverMetrics) observePromote(err error) {
	if err == nil {
		m.promoteSucceeded.Inc()
		return
	}
	m.promoteFailed.WithLabelValues(err.Error()).Inc()
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

func boolFloat(b bool) float64 { return float64(boolIndex(b)) }

// constGauge is a gauge that is 1 for one fixed label value, etcd's way of
// exporting an identity (server ID, version).
func constGauge(opts prometheus.Opts, label, value string) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts(opts), []string{label})
	g.WithLabelValues(value).Set(1)
	return g
}

// knownPeersCollector exports etcd_network_known_peers{Local,Remote}: 1 for
// every member of the cluster this member knows (itself included), read
// from the member list at scrape time.
type knownPeersCollector struct {
	id      uint64
	cluster *membership.Cluster
	desc    *prometheus.Desc
}

func newKnownPeersCollector(id uint64, cluster *membership.Cluster) *knownPeersCollector {
	return &knownPeersCollector{id: id, cluster: cluster, desc: prometheus.NewDesc("etcd_network_known_peers",
		"The current number of known peers.", []string{"Local", "Remote"}, nil)}
}

func (c *knownPeersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *knownPeersCollector) Collect(ch chan<- prometheus.Metric) {
	local := fmt.Sprintf("%x", c.id)
	for _, m := range c.cluster.Members() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, local, fmt.Sprintf("%x", m.ID))
	}
}

// fdUsed counts this process's open file descriptors, as etcd's
// runtime.FDUsage does (the entries of /proc/self/fd).
func fdUsed() float64 {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0
	}
	return float64(len(names))
}

// fdLimit is the soft limit on open file descriptors (RLIMIT_NOFILE).
func fdLimit() float64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return float64(l.Cur)
}
