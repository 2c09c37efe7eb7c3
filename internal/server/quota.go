package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/statemachine"
)

const (
	// DefaultQuotaBytes is etcd's default --quota-backend-bytes (2 GiB),
	// used when the flag is 0.
	DefaultQuotaBytes = int64(2 << 30)
	// MaxQuotaBytes is the largest quota etcd recommends (8 GiB); a larger
	// one is accepted with a warning.
	MaxQuotaBytes = int64(8 << 30)

	// Estimated costs of a request against the quota, etcd's: a key's
	// metadata and a lease record.
	quotaKVOverhead    = 256
	quotaLeaseOverhead = 64
)

// backendQuota is etcd's BackendQuota: a request that would grow the store
// fits while the engine's size (kvstore.Store.Size: for the memory engine
// the bytes of all keys and values it holds; for RocksDB its SST files
// plus memtables) plus the request's estimated cost stays below the quota.
// limit < 0 disables it.
type backendQuota struct {
	limit int64
	size  func() int64
}

// newBackendQuota resolves --quota-backend-bytes (0: etcd's 2 GiB, < 0:
// disabled) and logs it as etcd does, warning above 8 GiB.
func newBackendQuota(cfg int64, size func() int64, log *slog.Logger) backendQuota {
	switch {
	case cfg < 0:
		log.Info("disabled backend quota", "quota-size-bytes", cfg)
	case cfg == 0:
		cfg = DefaultQuotaBytes
		log.Info("enabled backend quota with default value", "quota-size-bytes", cfg, "quota-size", humanBytes(cfg))
	default:
		if cfg > MaxQuotaBytes {
			log.Warn("quota exceeds the maximum value", "quota-size-bytes", cfg, "quota-size", humanBytes(cfg),
				"quota-maximum-size-bytes", MaxQuotaBytes, "quota-maximum-size", humanBytes(MaxQuotaBytes))
		}
		log.Info("enabled backend quota", "quota-size-bytes", cfg, "quota-size", humanBytes(cfg))
	}
	return backendQuota{limit: cfg, size: size}
}

// available reports whether a request of this cost fits (cost 0: it does
// not grow the store and always fits).
func (q backendQuota) available(cost int) bool {
	if q.limit < 0 || cost == 0 {
		return true
	}
	return q.size()+int64(cost) < q.limit
}

// quotaCost is etcd's cost of a request: a put costs its key, value and
// metadata; a txn the costlier of its branches; a lease grant a lease
// record; everything else nothing.
func quotaCost(req any) int {
	switch r := req.(type) {
	case *pb.PutRequest:
		return quotaKVOverhead + len(r.Key) + len(r.Value)
	case *pb.TxnRequest:
		return max(txnBranchCost(r.Success), txnBranchCost(r.Failure))
	case *pb.LeaseGrantRequest:
		return quotaLeaseOverhead
	}
	return 0
}

func txnBranchCost(ops []*pb.RequestOp) int {
	cost := 0
	for _, op := range ops {
		if p := op.GetRequestPut(); p != nil {
			cost += quotaCost(p)
		} else if t := op.GetRequestTxn(); t != nil {
			cost += quotaCost(t)
		}
	}
	return cost
}

// quotaRequest is the request of an entry that the quota charges, nil for
// the others.
func quotaRequest(req *pb.InternalRaftRequest) any {
	switch {
	case req.Put != nil:
		return req.Put
	case req.Txn != nil:
		return req.Txn
	case req.LeaseGrant != nil:
		return req.LeaseGrant
	}
	return nil
}

// checkQuota refuses, before proposing, a request that does not fit and
// raises this member's NOSPACE alarm (etcd's quotaKVServer and
// quotaLeaseServer).
func (s *Server) checkQuota(ctx context.Context, req any) error {
	if s.quota.available(quotaCost(req)) {
		return nil
	}
	s.raiseAlarm(ctx, s.id, pb.AlarmType_NOSPACE)
	return ErrNoSpace
}

// noSpaceAfterApply is etcd's quota applier: a request that did not fit
// when it was applied is still applied (every member applies the same
// entries alike), but its proposer is answered with ErrNoSpace, and a
// member that has no NOSPACE alarm yet raises its own. Sizes differ
// between members, so only responses and alarm proposals depend on
// this, never the applied state.
func (a *applier) noSpaceAfterApply(req *pb.InternalRaftRequest, fits bool, res *statemachine.Result) (raise bool) {
	if fits || res.Err != nil {
		return false
	}
	res.Err = ErrNoSpace
	if a.alarms.has(pb.AlarmType_NOSPACE) {
		return false
	}
	a.log.Warn("message exceeded backend quota; raising alarm",
		"quota-size-bytes", a.quota.limit, "quota-size", humanBytes(a.quota.limit), "error", ErrNoSpace)
	return true
}

// opsMetrics are the quota and alarm series, under etcd's names.
type opsMetrics struct {
	quotaBytes prometheus.Gauge
	alarms     *prometheus.GaugeVec
}

func newOpsMetrics(reg prometheus.Registerer, log *slog.Logger) *opsMetrics {
	m := &opsMetrics{
		quotaBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcd", Subsystem: "server", Name: "quota_backend_bytes",
			Help: "Current backend storage quota size in bytes.",
		}),
		alarms: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "etcd_debugging", Subsystem: "server", Name: "alarms",
			Help: "Alarms for every member in cluster. 1 for 'server_id' label with current ID. 2 for 'alarm_type' label with type of this alarm",
		}, []string{"server_id", "alarm_type"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.quotaBytes, m.alarms} {
			var are prometheus.AlreadyRegisteredError
			if err := reg.Register(c); err != nil && !errors.As(err, &are) {
				log.Warn("cannot register quota metrics", "error", err)
			}
		}
	}
	return m
}

// alarmsChanged sets the alarm gauge to the active set.
func (m *opsMetrics) alarmsChanged(active []*pb.AlarmMember) {
	m.alarms.Reset()
	for _, a := range active {
		m.alarms.WithLabelValues(fmt.Sprintf("%x", a.MemberID), a.Alarm.String()).Set(1)
	}
}

// humanBytes formats a size as etcd's logs do (go-humanize's SI units).
func humanBytes(n int64) string {
	const unit = 1000
	if n < 10 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	v, i := float64(n), 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.0f %s", v, units[i])
}

// raiseNoSpaceThenAnswer raises this member's NOSPACE alarm through Raft,
// then answers the proposers whose requests exceeded the quota.
func (s *Server) raiseNoSpaceThenAnswer(held []statemachine.Pending) {
	ctx, cancel := context.WithTimeout(context.Background(), s.reqTimeout)
	s.raiseAlarm(ctx, s.id, pb.AlarmType_NOSPACE)
	cancel()
	for _, r := range held {
		s.wait.Trigger(r.ID, r.Result)
	}
}
