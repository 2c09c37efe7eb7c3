package kvstore_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
)

// TestMetricsCountAsEtcd checks the mvcc counters and gauges against what
// etcd 3.6 reports for the same requests (its metrics txn counts every
// range, put and delete of a transaction, a compare as a range, and a txn
// when it held more than one operation; keys_total counts live keys).
func TestMetricsCountAsEtcd(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := kvstore.Open(memory.New(), kvstore.Options{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put(&pb.PutRequest{Key: []byte("a"), Value: []byte("1")}))                // put
	must(s.Put(&pb.PutRequest{Key: []byte("b"), Value: []byte("22"), PrevKv: true})) // range + put: a txn
	must(s.Range(&pb.RangeRequest{Key: []byte("a")}))                                // range
	must(s.Txn(&pb.TxnRequest{                                                       // 1 compare + put + range + nested (0 compares, delete)
		Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Version{Version: 1}}},
		Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("c"), Value: []byte("333")}}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a")}}},
			{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{
				{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("b")}}},
			}}}},
		},
	}))
	must(s.DeleteRange(&pb.DeleteRangeRequest{Key: []byte("a")})) // delete
	if _, err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"etcd_mvcc_put_total":                         3,
		"etcd_mvcc_range_total":                       4,
		"etcd_mvcc_delete_total":                      2,
		"etcd_mvcc_txn_total":                         2,
		"etcd_debugging_mvcc_total_put_size_in_bytes": 2 + 3 + 4,
		"etcd_debugging_mvcc_keys_total":              1, // c
		"etcd_debugging_mvcc_current_revision":        5,
		"etcd_debugging_mvcc_compact_revision":        -1,
	}
	for name, v := range want {
		if got := metricValue(t, reg, name); got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	if got := metricValue(t, reg, "etcd_disk_backend_commit_duration_seconds"); got != 1 {
		t.Errorf("backend commits observed: %v, want 1", got)
	}
}

// metricValue is a counter's or gauge's value, or a histogram's count.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		m := f.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("%s not registered", name)
	return 0
}
