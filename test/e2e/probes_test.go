package e2e

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// TestProbesAsEtcd checks /livez and /readyz as etcd serves them: "ok" when
// every check passes, the per-check paths, ?verbose's check list, ?exclude,
// GET only, and the healthcheck metrics each probe records.
func TestProbesAsEtcd(t *testing.T) {
	ctx := testContext(t, testTimeout)
	s := startServer(t, framework.ClusterConfig{})
	sc := newScraper(t, s.member())
	before := mustScrape(ctx, t, sc)
	get := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, sc.clientURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := sc.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/livez", "/readyz", "/livez/serializable_read", "/readyz/linearizable_read",
		"/readyz/non_learner", "/readyz/data_corruption", "/readyz?exclude=linearizable_read,non_learner"} {
		if code, body := get(http.MethodGet, path); code != http.StatusOK || body != "ok\n" {
			t.Errorf("GET %s = %d %q, want 200 \"ok\\n\"", path, code, body)
		}
	}
	// etcd runs the checks in map order: compare the lines as a set.
	code, body := get(http.MethodGet, "/readyz?verbose")
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	slices.Sort(lines)
	want := []string{"[+]data_corruption ok", "[+]linearizable_read ok", "[+]non_learner ok", "[+]serializable_read ok", "ok"}
	if code != http.StatusOK || !slices.Equal(lines, want) {
		t.Errorf("GET /readyz?verbose = %d %q, want 200 with lines %q", code, body, want)
	}
	if code, _ := get(http.MethodPost, "/readyz"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz = %d, want 405", code)
	}
	success := func(kind, name string) map[string]string {
		return map[string]string{"type": kind, "name": name, "status": "success"}
	}
	waitMetrics(ctx, t, sc, map[string]metricCheck{
		"livez read":        increased(before, "etcd_server_healthchecks_total", success("livez", "serializable_read"), 2),
		"readyz linearized": increased(before, "etcd_server_healthchecks_total", success("readyz", "linearizable_read"), 2),
		"readyz excluded":   increased(before, "etcd_server_healthchecks_total", success("readyz", "data_corruption"), 4),
		"last result":       equals("etcd_server_healthcheck", map[string]string{"type": "readyz", "name": "non_learner"}, 1),
	})
}
