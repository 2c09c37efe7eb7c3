package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// etcdMetricsMetaStoreLacks are the metric families a real etcd 3.6
// exports for quantities MetaStore does not have, each with the reason.
// Every other etcd family must be served by MetaStore, with etcd's type
// and label names.
var etcdMetricsMetaStoreLacks = map[string]string{
	// bbolt's commit phases. MetaStore's engines (an in-memory B-tree,
	// RocksDB) commit a batch in one step, timed as
	// etcd_disk_backend_commit_duration_seconds.
	"etcd_debugging_disk_backend_commit_rebalance_duration_seconds": "bbolt commit phase; no bbolt",
	"etcd_debugging_disk_backend_commit_spill_duration_seconds":     "bbolt commit phase; no bbolt",
	"etcd_debugging_disk_backend_commit_write_duration_seconds":     "bbolt commit phase; no bbolt",
	// etcd's v2 store, which in 3.6 only holds the member list for
	// downgrades; MetaStore keeps members in its MVCC store's aux buckets.
	"etcd_debugging_store_expires_total":        "v2 store; none in MetaStore",
	"etcd_debugging_store_reads_total":          "v2 store; none in MetaStore",
	"etcd_debugging_store_watch_requests_total": "v2 store; none in MetaStore",
	"etcd_debugging_store_watchers":             "v2 store; none in MetaStore",
	"etcd_debugging_store_writes_total":         "v2 store; none in MetaStore",
	// Registered by the etcd binary for its `etcd grpc-proxy` mode, which
	// MetaStore does not have.
	"etcd_grpc_proxy_cache_hits_total":          "grpc-proxy mode; none in MetaStore",
	"etcd_grpc_proxy_cache_keys_total":          "grpc-proxy mode; none in MetaStore",
	"etcd_grpc_proxy_cache_misses_total":        "grpc-proxy mode; none in MetaStore",
	"etcd_grpc_proxy_events_coalescing_total":   "grpc-proxy mode; none in MetaStore",
	"etcd_grpc_proxy_watchers_coalescing_total": "grpc-proxy mode; none in MetaStore",
}

// etcdMetricsOnEvent are etcd families that etcd exports only once
// something happened (a labelled series appears with its first count) or
// under a flag, so a quiet etcd may lack them while MetaStore, which
// creates some series up front, already serves them.
var etcdMetricsOnEvent = []string{
	"etcd_network_peer_sent_failures_total",
	"etcd_network_peer_received_failures_total",
	"etcd_network_server_stream_failures_total",
	"etcd_network_snapshot_send_success",
	"etcd_network_snapshot_send_failures",
	"etcd_network_snapshot_send_inflights_total",
	"etcd_network_snapshot_send_total_duration_seconds",
	"etcd_network_snapshot_receive_success",
	"etcd_network_snapshot_receive_failures",
	"etcd_network_snapshot_receive_inflights_total",
	"etcd_network_snapshot_receive_total_duration_seconds",
	"etcd_network_disconnected_peers_total",
	"etcd_server_learner_promote_failures",
	"etcd_debugging_server_alarms",
}

// familyShape is what the comparison looks at: type and label names.
type familyShape struct {
	typ    string
	labels []string
}

// clusterMetricShapes runs metricsTraffic against a fresh 3-member cluster
// of target and returns the shape of every family any member serves.
func clusterMetricShapes(ctx context.Context, t *testing.T, target framework.Target) map[string]familyShape {
	t.Helper()
	c := framework.NewCluster(t, framework.ClusterConfig{Target: target, Size: 3, ExtraFlags: []string{"--metrics=extensive"}})
	mc := newMemberClients(t, c)
	leader := mc.waitLeader(ctx, t, c.Members())
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	metricsTraffic(tctx, t, mc.of(t, leader))
	// The probes record etcd_server_healthcheck*.
	sc := newScraper(t, leader)
	for _, path := range []string{"/livez", "/readyz"} {
		resp, err := sc.hc.Get(sc.clientURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// Peers measure round trips on their own schedule: wait for one.
	waitMetrics(ctx, t, sc, map[string]metricCheck{
		"peer round trip": positive("etcd_network_peer_round_trip_time_seconds", nil),
	})
	shapes := map[string]familyShape{}
	for _, m := range c.Members() {
		for name, f := range mustScrape(ctx, t, newScraper(t, m)) {
			s := shapes[name]
			s.typ = typeName(f)
			for _, l := range labelNames(f) {
				if !slices.Contains(s.labels, l) {
					s.labels = append(s.labels, l)
				}
			}
			slices.Sort(s.labels)
			shapes[name] = s
		}
	}
	return shapes
}

// TestMetricsMatchEtcd compares the metric families of a real etcd 3.6
// and of MetaStore after the same traffic: every etcd family must be
// served by MetaStore with etcd's type and label names unless it is in
// etcdMetricsMetaStoreLacks, and every family MetaStore serves must be
// etcd's or carry the metastore_ prefix.
func TestMetricsMatchEtcd(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	etcd := clusterMetricShapes(ctx, t, framework.TargetEtcd)
	ours := clusterMetricShapes(ctx, t, framework.TargetMetaStore)

	for _, name := range sortedKeys(etcd) {
		want := etcd[name]
		got, ok := ours[name]
		reason, lacks := etcdMetricsMetaStoreLacks[name]
		switch {
		case !ok && !lacks:
			t.Errorf("%s (%s %v): etcd serves it, MetaStore does not", name, want.typ, want.labels)
		case ok && lacks:
			t.Errorf("%s: MetaStore serves it now; drop it from etcdMetricsMetaStoreLacks (%q)", name, reason)
		case !ok:
			continue
		case got.typ != want.typ:
			t.Errorf("%s: MetaStore's type is %s, etcd's %s", name, got.typ, want.typ)
		case !slices.Equal(got.labels, want.labels):
			t.Errorf("%s: MetaStore's labels are %v, etcd's %v", name, got.labels, want.labels)
		}
	}
	for _, name := range sortedKeys(ours) {
		if _, ok := etcd[name]; ok || strings.HasPrefix(name, "metastore_") || slices.Contains(etcdMetricsOnEvent, name) {
			continue
		}
		t.Errorf("%s: MetaStore serves it, etcd does not (MetaStore-only metrics are named metastore_*)", name)
	}
	t.Logf("etcd serves %d families, MetaStore %d; %d etcd families are for quantities MetaStore lacks",
		len(etcd), len(ours), len(etcdMetricsMetaStoreLacks))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
