package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestFeatureGateMetrics checks etcd_server_feature_enabled follows the
// resolved gates, AllAlpha and AllBeta included, as etcd exports them.
func TestFeatureGateMetrics(t *testing.T) {
	o, _, err := parse(t, "--feature-gates=AllAlpha=true,TxnModeWriteWithSharedBuffer=false")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(o.features.metrics())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var name, stage string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "name":
					name = l.GetValue()
				case "stage":
					stage = l.GetValue()
				}
			}
			got[name+"/"+stage] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"AllAlpha/ALPHA": 1, "AllBeta/BETA": 0, "InitialCorruptCheck/ALPHA": 1, "CompactHashCheck/ALPHA": 1,
		"StopGRPCServiceOnDefrag/ALPHA": 1, "TxnModeWriteWithSharedBuffer/BETA": 0,
	}
	if len(got) != 2+len(etcdFeatures) {
		t.Errorf("%d series %v, want one per gate and AllAlpha, AllBeta", len(got), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
