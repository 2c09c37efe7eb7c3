package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// statsConfig is what the stats subcommand accepts.
type statsConfig struct {
	endpoint    string
	forceGC     bool
	heapProfile string
	timeout     time.Duration
}

// The Go runtime metrics read from /metrics; both etcd and MetaStore
// register the Prometheus Go collector.
const (
	heapInuseMetric  = "go_memstats_heap_inuse_bytes"
	goroutinesMetric = "go_goroutines"
)

// printStats prints heap_inuse_bytes= and goroutines= from the server's
// /metrics, after forcing a garbage collection if asked to.
func printStats(ctx context.Context, c statsConfig, out io.Writer) error {
	base := "http://" + c.endpoint
	if c.forceGC {
		// The heap profile handler runs runtime.GC before it samples when
		// gc=1 is given; the profile itself is a by-product.
		profile, err := httpGet(ctx, base+"/debug/pprof/heap?gc=1")
		if err != nil {
			return fmt.Errorf("force GC (is --enable-pprof on?): %w", err)
		}
		if c.heapProfile != "" {
			if err := os.WriteFile(c.heapProfile, profile, 0o644); err != nil {
				return fmt.Errorf("save heap profile: %w", err)
			}
		}
	}
	body, err := httpGet(ctx, base+"/metrics")
	if err != nil {
		return err
	}
	values, err := gauges(body, heapInuseMetric, goroutinesMetric)
	if err != nil {
		return fmt.Errorf("%s/metrics: %w", base, err)
	}
	fmt.Fprintf(out, "heap_inuse_bytes=%.0f\ngoroutines=%.0f\n", values[heapInuseMetric], values[goroutinesMetric])
	return nil
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: read body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// gauges picks the named unlabelled gauges out of a Prometheus text
// exposition; each must be there.
func gauges(exposition []byte, names ...string) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(exposition))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	values := make(map[string]float64, len(names))
	for _, name := range names {
		family := families[name]
		if family == nil || family.GetType() != dto.MetricType_GAUGE || len(family.Metric) != 1 {
			return nil, fmt.Errorf("no single gauge %s", name)
		}
		values[name] = family.Metric[0].GetGauge().GetValue()
	}
	return values, nil
}
