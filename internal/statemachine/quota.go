package statemachine

import (
	"fmt"
	"log/slog"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
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

// Quota is etcd's BackendQuota: a request that would grow the store fits
// while the engine's size (kvstore.Store.Size: for the memory engine the
// bytes of all keys and values it holds; for RocksDB its SST files plus
// memtables) plus the request's estimated cost stays below the quota.
// A limit below 0 disables it.
type Quota struct {
	limit int64
	size  func() int64
}

// NewQuota resolves --quota-backend-bytes (0: etcd's 2 GiB, < 0:
// disabled) over the engine's size and logs it as etcd does, warning
// above 8 GiB.
func NewQuota(cfg int64, size func() int64, log *slog.Logger) Quota {
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
	return Quota{limit: cfg, size: size}
}

// Limit is the quota in force in bytes, negative when disabled.
func (q Quota) Limit() int64 { return q.limit }

// Available reports whether a request of this cost fits (cost 0: it does
// not grow the store and always fits; the zero Quota has no size and
// lets everything fit).
func (q Quota) Available(cost int) bool {
	if q.limit < 0 || cost == 0 || q.size == nil {
		return true
	}
	return q.size()+int64(cost) < q.limit
}

// QuotaCost is etcd's cost of a request: a put costs its key, value and
// metadata; a txn the costlier of its branches; a lease grant a lease
// record; everything else nothing.
func QuotaCost(req any) int {
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
			cost += QuotaCost(p)
		} else if t := op.GetRequestTxn(); t != nil {
			cost += QuotaCost(t)
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

// noSpaceAfterApply is etcd's quota applier: a request that did not fit
// when it was applied is still applied (every member applies the same
// entries alike), but its proposer is answered with ErrNoSpace, and a
// member that has no NOSPACE alarm yet raises its own. Sizes differ
// between members, so only responses and alarm proposals depend on
// this, never the applied state.
func (sm *StateMachine) noSpaceAfterApply(fits bool, res *Result) (raise bool) {
	log, q := sm.Log, sm.Quota
	if fits || res.Err != nil {
		return false
	}
	res.Err = membererr.ErrNoSpace
	if sm.Alarms.Has(pb.AlarmType_NOSPACE) {
		return false
	}
	log.Warn("message exceeded backend quota; raising alarm",
		"quota-size-bytes", q.limit, "quota-size", humanBytes(q.limit), "error", membererr.ErrNoSpace)
	return true
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
