package etcdcompat

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"
)

func newTestClientMetrics(t *testing.T) (*clientMetrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := newClientMetrics(reg, reg, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// seriesValue is the value of the counter or gauge series of name whose
// labels are exactly labels; ok is false when there is none.
func seriesValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !labelsAre(m, labels) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func labelsAre(m *dto.Metric, want map[string]string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for _, l := range m.GetLabel() {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}

// TestClientRequestsByVersion checks etcd's client_requests_total: by the
// client-api-version metadata, "unknown" without it, a series only once
// counted, nothing for a call without metadata, and etcd's error for a
// version that is not UTF-8.
func TestClientRequestsByVersion(t *testing.T) {
	m, reg := newTestClientMetrics(t)
	g := leaderGuard{metrics: m}
	count := func(md metadata.MD, stream bool) error {
		ctx := context.Background()
		if md != nil {
			ctx = metadata.NewIncomingContext(ctx, md)
		}
		return g.countRequest(ctx, stream)
	}
	if _, ok := seriesValue(t, reg, "etcd_server_client_requests_total", map[string]string{"type": "unary", "client_api_version": "3.6"}); ok {
		t.Fatal("a client version series exists before any request")
	}
	md36 := metadata.Pairs(rpctypes.MetadataClientAPIVersionKey, "3.6")
	for range 3 {
		if err := count(md36, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := count(metadata.MD{}, true); err != nil {
		t.Fatal(err)
	}
	if err := count(metadata.Pairs(rpctypes.MetadataClientAPIVersionKey, "9.9"), false); err != nil {
		t.Fatal(err)
	}
	if err := count(nil, true); err != nil { // not counted
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ, ver string
		want     float64
	}{{"unary", "3.6", 3}, {"stream", "unknown", 1}, {"unary", "9.9", 1}} {
		got, ok := seriesValue(t, reg, "etcd_server_client_requests_total", map[string]string{"type": c.typ, "client_api_version": c.ver})
		if !ok || got != c.want {
			t.Errorf("client_requests_total{type=%q,client_api_version=%q} = %v (present %v), want %v", c.typ, c.ver, got, ok, c.want)
		}
	}
	err := count(metadata.Pairs(rpctypes.MetadataClientAPIVersionKey, "\xff"), false)
	if err != rpctypes.ErrGRPCInvalidClientAPIVersion {
		t.Fatalf("invalid UTF-8 version: %v, want %v", err, rpctypes.ErrGRPCInvalidClientAPIVersion)
	}
	// Counting a known version on the request path allocates only the
	// copy of its value gRPC's metadata package makes.
	ctx36 := metadata.NewIncomingContext(context.Background(), md36)
	if allocs := testing.AllocsPerRun(100, func() { _ = g.countRequest(ctx36, false) }); allocs > 1 {
		t.Errorf("countRequest allocates %v times per request, want at most 1", allocs)
	}
}

// TestCountingCodecCountsBytes checks etcd_network_client_grpc_*_bytes_total
// count the encoded size of every message in and out.
func TestCountingCodecCountsBytes(t *testing.T) {
	m, reg := newTestClientMetrics(t)
	codec := m.serverCodec()
	msg := &pb.PutRequest{Key: []byte("key"), Value: []byte("value")}
	out, err := codec.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Free()
	var back pb.PutRequest
	if err := codec.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if string(back.Key) != "key" || string(back.Value) != "value" {
		t.Fatalf("round trip gave %v", &back)
	}
	for _, name := range []string{"etcd_network_client_grpc_sent_bytes_total", "etcd_network_client_grpc_received_bytes_total"} {
		if got, _ := seriesValue(t, reg, name, map[string]string{}); got != float64(msg.Size()) {
			t.Errorf("%s = %v, want %d", name, got, msg.Size())
		}
	}
}
