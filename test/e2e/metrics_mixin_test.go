package e2e

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// mixinSeries is one line of testdata/etcd_mixin_series.txt.
type mixinSeries struct {
	name   string
	typ    string
	labels []string
}

func readMixinSeries(t *testing.T) []mixinSeries {
	t.Helper()
	f, err := os.Open("testdata/etcd_mixin_series.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mixinSeries
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			t.Fatalf("testdata/etcd_mixin_series.txt: bad line %q", line)
		}
		labels := fields[2:]
		slices.Sort(labels)
		out = append(out, mixinSeries{name: fields[0], typ: fields[1], labels: labels})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("testdata/etcd_mixin_series.txt lists no series")
	}
	return out
}

// TestMetricsMixinSeries checks that every series etcd's own dashboard
// and alert rules (contrib/mixin) query is served, with etcd's type and
// label names, by a 3-member cluster after client traffic and the loss of
// a member, and that the dashboard's panels have data.
func TestMetricsMixinSeries(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	want := readMixinSeries(t)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, ExtraFlags: []string{"--metrics=extensive"}})
	mc := newMemberClients(t, c)
	leader := mc.waitLeader(ctx, t, c.Members())
	metricsTraffic(ctx, t, mc.of(t, leader))

	// A member goes down: the leader's sends to it fail, which is what
	// etcdMembersDown reads (etcd_network_peer_sent_failures_total).
	victim := others(c.Members(), leader)[0]
	victimID := fmt.Sprintf("%x", mc.memberID(ctx, t, victim))
	if _, err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	waitMetrics(ctx, t, newScraper(t, leader), map[string]metricCheck{
		"sends to the killed member fail": positive("etcd_network_peer_sent_failures_total", map[string]string{"To": victimID}),
		// The dashboard's panels.
		"watch streams":   positive("grpc_server_started_total", map[string]string{"grpc_service": "etcdserverpb.Watch", "grpc_type": "bidi_stream"}),
		"lease streams":   positive("grpc_server_started_total", map[string]string{"grpc_service": "etcdserverpb.Lease", "grpc_type": "bidi_stream"}),
		"RPC rate":        positive("grpc_server_started_total", map[string]string{"grpc_type": "unary"}),
		"peer traffic in": positive("etcd_network_peer_received_bytes_total", nil),
		"peer RTT":        positive("etcd_network_peer_round_trip_time_seconds_bucket", nil),
		"unary latency":   positive("grpc_server_handling_seconds_bucket", map[string]string{"grpc_method": "Put", "grpc_type": "unary"}),
		"DB size":         positive("etcd_mvcc_db_total_size_in_bytes", nil),
	})

	fams := mustScrape(ctx, t, newScraper(t, leader))
	found := 0
	for _, s := range want {
		f, ok := fams.family(s.name)
		if !ok {
			t.Errorf("%s: not served", s.name)
			continue
		}
		typ, labels := typeName(f), labelNames(f)
		if typ != s.typ {
			t.Errorf("%s: type %s, etcd's is %s", s.name, typ, s.typ)
		}
		if !slices.Equal(labels, s.labels) {
			t.Errorf("%s: labels %v, etcd's are %v", s.name, labels, s.labels)
		}
		if typ == s.typ && slices.Equal(labels, s.labels) {
			found++
		}
	}
	t.Logf("%s serves %d of the %d series etcd's mixin references, with etcd's type and labels", c.Target(), found, len(want))
}
