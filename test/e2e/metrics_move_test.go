package e2e

import (
	"context"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// TestMetricsMove checks that the series operators watch move as they do
// on etcd: identity and state gauges hold etcd's values, and each kind of
// request moves the counters and histograms etcd moves for it.
func TestMetricsMove(t *testing.T) {
	ctx := testContext(t, testTimeout)
	s := startServer(t, framework.ClusterConfig{})
	sc := newScraper(t, s.member())
	status, err := s.cli.Status(ctx, s.member().Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%x", status.Header.MemberId)

	before := mustScrape(ctx, t, sc)
	put, err := s.cli.Put(ctx, "metrics/a", "1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Get(ctx, "metrics/a"); err != nil {
		t.Fatal(err)
	}
	unary := map[string]string{"grpc_type": "unary"}
	waitMetrics(ctx, t, sc, map[string]metricCheck{
		"leader":              equals("etcd_server_has_leader", nil, 1),
		"is leader":           equals("etcd_server_is_leader", nil, 1),
		"not a learner":       equals("etcd_server_is_learner", nil, 0),
		"identity":            equals("etcd_server_id", map[string]string{"server_id": id}, 1),
		"version":             equals("etcd_server_version", map[string]string{"server_version": "3.6.16"}, 1),
		"cluster version":     equals("etcd_cluster_version", map[string]string{"cluster_version": "3.6"}, 1),
		"default quota":       equals("etcd_server_quota_backend_bytes", nil, 2<<30),
		"beta gate on":        equals("etcd_server_feature_enabled", map[string]string{"name": "TxnModeWriteWithSharedBuffer", "stage": "BETA"}, 1),
		"alpha gate off":      equals("etcd_server_feature_enabled", map[string]string{"name": "CompactHashCheck", "stage": "ALPHA"}, 0),
		"auth revision":       equals("etcd_debugging_auth_revision", nil, 1),
		"no proposal pending": equals("etcd_server_proposals_pending", nil, 0),
		"current revision":    equals("etcd_debugging_mvcc_current_revision", nil, float64(put.Header.Revision)),
		"committed":           increased(before, "etcd_server_proposals_committed_total", nil, 1),
		"applied":             increased(before, "etcd_server_proposals_applied_total", nil, 1),
		"WAL fsync":           increased(before, "etcd_disk_wal_fsync_duration_seconds", nil, 1),
		"WAL bytes":           increased(before, "etcd_disk_wal_write_bytes_total", nil, 1),
		"backend commit":      increased(before, "etcd_disk_backend_commit_duration_seconds", nil, 1),
		"apply duration":      increased(before, "etcd_server_apply_duration_seconds", map[string]string{"op": "Put", "success": "true", "version": "v3"}, 1),
		"range duration":      increased(before, "etcd_server_range_duration_seconds", map[string]string{"success": "true"}, 1),
		"mvcc put":            increased(before, "etcd_mvcc_put_total", nil, 1),
		"mvcc range":          increased(before, "etcd_mvcc_range_total", nil, 1),
		"put size":            increased(before, "etcd_debugging_mvcc_total_put_size_in_bytes", nil, float64(len("metrics/a1"))),
		"keys":                increased(before, "etcd_debugging_mvcc_keys_total", nil, 1),
		"gRPC Put started":    increased(before, "grpc_server_started_total", map[string]string{"grpc_method": "Put", "grpc_service": "etcdserverpb.KV", "grpc_type": "unary"}, 1),
		"gRPC Put handled OK": increased(before, "grpc_server_handled_total", map[string]string{"grpc_method": "Put", "grpc_code": "OK", "grpc_type": "unary"}, 1),
		"gRPC Range handled":  increased(before, "grpc_server_handled_total", map[string]string{"grpc_method": "Range", "grpc_code": "OK"}, 1),
		"gRPC messages in":    increased(before, "grpc_server_msg_received_total", unary, 2),
		"client requests":     increased(before, "etcd_server_client_requests_total", map[string]string{"type": "unary", "client_api_version": "3.6"}, 2),
		"client bytes in":     increased(before, "etcd_network_client_grpc_received_bytes_total", nil, 1),
		"client bytes out":    increased(before, "etcd_network_client_grpc_sent_bytes_total", nil, 1),
		"DB size":             positive("etcd_mvcc_db_total_size_in_bytes", nil),
		"DB size in use":      positive("etcd_mvcc_db_total_size_in_use_in_bytes", nil),
		"fds used":            positive("os_fd_used", nil),
		"fd limit":            positive("os_fd_limit", nil),
		"resident memory":     positive("process_resident_memory_bytes", nil),
		"goroutines":          positive("go_goroutines", nil),
	})

	// A failed request is counted with its code: a txn over the limit of
	// operations fails InvalidArgument before it reaches raft.
	before = mustScrape(ctx, t, sc)
	ops := make([]clientv3.Op, 129)
	for i := range ops {
		ops[i] = clientv3.OpPut(fmt.Sprintf("metrics/big%d", i), "v")
	}
	if _, err := s.cli.Txn(ctx).Then(ops...).Commit(); err == nil {
		t.Fatal("txn of 129 ops succeeded, want too many operations")
	}
	if _, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("metrics/a"), "=", 1)).
		Then(clientv3.OpPut("metrics/b", "2"), clientv3.OpGet("metrics/a")).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Delete(ctx, "metrics/b"); err != nil {
		t.Fatal(err)
	}
	compactAt := put.Header.Revision + 1
	if _, err := s.cli.Compact(ctx, compactAt); err != nil {
		t.Fatal(err)
	}
	if _, err := pb.NewMaintenanceClient(s.cli.ActiveConnection()).HashKV(ctx, &pb.HashKVRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cli.Defragment(ctx, s.member().Endpoint()); err != nil {
		t.Fatal(err)
	}
	resp, err := sc.hc.Get(sc.clientURL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wch := s.cli.Watch(wctx, "metrics/w")
	if _, err := s.cli.Put(ctx, "metrics/w", "x"); err != nil {
		t.Fatal(err)
	}
	<-wch
	waitMetrics(ctx, t, sc, map[string]metricCheck{
		"txn refused":       increased(before, "grpc_server_handled_total", map[string]string{"grpc_method": "Txn", "grpc_code": "InvalidArgument"}, 1),
		"txn":               increased(before, "etcd_mvcc_txn_total", nil, 1),
		"delete":            increased(before, "etcd_mvcc_delete_total", nil, 1),
		"compacted":         equals("etcd_debugging_mvcc_compact_revision", nil, float64(compactAt)),
		"hash":              increased(before, "etcd_mvcc_hash_rev_duration_seconds", nil, 1),
		"defrag":            increased(before, "etcd_disk_backend_defrag_duration_seconds", nil, 1),
		"not defragmenting": equals("etcd_disk_defrag_inflight", nil, 0),
		"health":            increased(before, "etcd_server_health_success", nil, 1),
		"watch stream":      equals("etcd_debugging_mvcc_watch_stream_total", nil, 1),
		"watcher":           equals("etcd_debugging_mvcc_watcher_total", nil, 1),
		"events sent":       increased(before, "etcd_debugging_mvcc_events_total", nil, 1),
		"stream request":    increased(before, "etcd_server_client_requests_total", map[string]string{"type": "stream"}, 1),
		"watch started":     increased(before, "grpc_server_started_total", map[string]string{"grpc_method": "Watch", "grpc_type": "bidi_stream"}, 1),
	})
}
