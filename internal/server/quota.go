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

// checkQuota refuses, before proposing, a request that does not fit and
// raises this member's NOSPACE alarm (etcd's quotaKVServer and
// quotaLeaseServer).
func (s *Server) checkQuota(ctx context.Context, req any) error {
	if s.quota.Available(statemachine.QuotaCost(req)) {
		return nil
	}
	s.raiseAlarm(ctx, s.id, pb.AlarmType_NOSPACE)
	return ErrNoSpace
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
