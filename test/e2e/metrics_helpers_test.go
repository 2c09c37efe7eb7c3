package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// metricFamilies is one parsed /metrics page, by family name.
type metricFamilies map[string]*dto.MetricFamily

// scraper reads one member's /metrics page over the member's client URL,
// with the cluster's TLS when it has some.
type scraper struct {
	hc        *http.Client
	clientURL string
}

func newScraper(t *testing.T, m *framework.Member) scraper {
	return scraper{hc: m.HTTPClient(t), clientURL: m.ClientURL()}
}

// scrapeMetrics reads and parses the member's /metrics page.
func scrapeMetrics(ctx context.Context, sc scraper) (metricFamilies, error) {
	clientURL := sc.clientURL
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := sc.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s/metrics: %w", clientURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s/metrics: %s: %s", clientURL, resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s/metrics: %w", clientURL, err)
	}
	return fams, nil
}

func mustScrape(ctx context.Context, t *testing.T, sc scraper) metricFamilies {
	t.Helper()
	fams, err := scrapeMetrics(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// family finds the family a series name belongs to: a histogram's
// name_bucket, name_sum and name_count series belong to name.
func (fs metricFamilies) family(series string) (*dto.MetricFamily, bool) {
	if f, ok := fs[series]; ok {
		return f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok {
			if f, ok := fs[base]; ok && (f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
				return f, true
			}
		}
	}
	return nil, false
}

// typeName is the type as the exposition format spells it.
func typeName(f *dto.MetricFamily) string { return strings.ToLower(f.GetType().String()) }

// labelNames is the sorted union of the label names of a family's series.
func labelNames(f *dto.MetricFamily) []string {
	var names []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if !slices.Contains(names, l.GetName()) {
				names = append(names, l.GetName())
			}
		}
	}
	slices.Sort(names)
	return names
}

// value sums the series of a family whose labels include want: a counter's
// or gauge's value, a histogram's sample count. ok is false when no series
// matches.
func (fs metricFamilies) value(name string, want map[string]string) (sum float64, ok bool) {
	f, found := fs.family(name)
	if !found {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		ok = true
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, ok
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// metricCheck is a condition on one scrape; it returns "" when it holds,
// else what is wrong.
type metricCheck func(fs metricFamilies) string

// waitMetrics scrapes the member until every check holds, and fails the test
// with the checks still failing when ctx ends. Some figures move a moment
// after the request that moves them (etcd commits its backend every
// 100 ms), so they are polled rather than read once.
func waitMetrics(ctx context.Context, t *testing.T, sc scraper, checks map[string]metricCheck) {
	t.Helper()
	var failing []string
	for {
		fams, err := scrapeMetrics(ctx, sc)
		failing = failing[:0]
		if err != nil {
			failing = append(failing, err.Error())
		} else {
			for name, check := range checks {
				if msg := check(fams); msg != "" {
					failing = append(failing, name+": "+msg)
				}
			}
		}
		if len(failing) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			slices.Sort(failing)
			t.Fatalf("metrics of %s never got there:\n  %s", sc.clientURL, strings.Join(failing, "\n  "))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// increased checks that a series grew by at least by since before.
func increased(before metricFamilies, name string, labels map[string]string, by float64) metricCheck {
	was, _ := before.value(name, labels)
	return func(fs metricFamilies) string {
		now, ok := fs.value(name, labels)
		if !ok {
			return fmt.Sprintf("no series %s%v", name, labels)
		}
		if now < was+by {
			return fmt.Sprintf("%s%v = %v, want >= %v", name, labels, now, was+by)
		}
		return ""
	}
}

// equals checks a series' value.
func equals(name string, labels map[string]string, want float64) metricCheck {
	return func(fs metricFamilies) string {
		got, ok := fs.value(name, labels)
		if !ok {
			return fmt.Sprintf("no series %s%v", name, labels)
		}
		if got != want {
			return fmt.Sprintf("%s%v = %v, want %v", name, labels, got, want)
		}
		return ""
	}
}

// positive checks that a series is above zero.
func positive(name string, labels map[string]string) metricCheck {
	return func(fs metricFamilies) string {
		got, ok := fs.value(name, labels)
		if !ok {
			return fmt.Sprintf("no series %s%v", name, labels)
		}
		if got <= 0 {
			return fmt.Sprintf("%s%v = %v, want > 0", name, labels, got)
		}
		return ""
	}
}

// metricsTraffic exercises what moves the metrics etcd's dashboards read:
// unary KV requests (puts, a range, a txn, a delete, a compaction), a
// watch stream that sees an event, and a lease with a keep-alive stream.
// The streams stay open until ctx ends.
func metricsTraffic(ctx context.Context, t *testing.T, cli *clientv3.Client) {
	t.Helper()
	wch := cli.Watch(ctx, "metrics/", clientv3.WithPrefix())
	var last int64
	for i := range 5 {
		resp, err := cli.Put(ctx, fmt.Sprintf("metrics/k%d", i), "v")
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		last = resp.Header.Revision
	}
	select {
	case wr := <-wch:
		if err := wr.Err(); err != nil {
			t.Fatalf("watch: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("watch saw no event")
	}
	if _, err := cli.Get(ctx, "metrics/", clientv3.WithPrefix()); err != nil {
		t.Fatalf("get: %v", err)
	}
	if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("metrics/k0"), ">", 0)).
		Then(clientv3.OpPut("metrics/t", "1"), clientv3.OpGet("metrics/k1")).Commit(); err != nil {
		t.Fatalf("txn: %v", err)
	}
	if _, err := cli.Delete(ctx, "metrics/k4"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := cli.Compact(ctx, last); err != nil {
		t.Fatalf("compact: %v", err)
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	ka, err := cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		t.Fatalf("keep-alive: %v", err)
	}
	select {
	case _, ok := <-ka:
		if !ok {
			t.Fatal("keep-alive stream closed")
		}
	case <-ctx.Done():
		t.Fatal("no keep-alive answer")
	}
}
