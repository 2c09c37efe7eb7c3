package framework

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// MetricSeries reads m's /metrics page and returns the value of each of
// the named unlabelled series ("etcd_debugging_mvcc_watcher_total",
// "etcd_disk_wal_fsync_duration_seconds_count"); a series the page does
// not have is absent from the map. For whole families with labels, parse
// the page with prometheus' expfmt instead.
func (m *Member) MetricSeries(ctx context.Context, t testing.TB, names ...string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.HTTPClient(t).Do(req)
	if err != nil {
		t.Fatalf("metrics of %s: %v", m.Name(), err)
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metrics of %s: %q: %v", m.Name(), sc.Text(), err)
		}
		got[name] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(fmt.Errorf("metrics of %s: %w", m.Name(), err))
	}
	return got
}
