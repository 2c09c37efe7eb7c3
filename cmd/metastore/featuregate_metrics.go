package main

import "github.com/prometheus/client_golang/prometheus"

// metrics exports the gates as etcd's etcd_server_feature_enabled{name,
// stage}: 1 for an enabled gate, 0 otherwise, AllAlpha and AllBeta first.
func (g *featureGates) metrics() prometheus.Collector {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_server_feature_enabled",
		Help: "Whether or not a feature is enabled. 1 is enabled, 0 is not.",
	}, []string{"name", "stage"})
	set := func(name, stage string, on bool) {
		val := 0.0
		if on {
			val = 1
		}
		v.WithLabelValues(name, stage).Set(val)
	}
	set("AllAlpha", "ALPHA", g.set["AllAlpha"])
	set("AllBeta", "BETA", g.set["AllBeta"])
	for _, f := range etcdFeatures {
		set(f.name, f.preRelease, g.Enabled(f.name))
	}
	return v
}
