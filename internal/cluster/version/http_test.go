package version

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestServeVersionsAsEtcd(t *testing.T) {
	v := Versions{Server: "3.6.16", Cluster: NotDecided, Storage: "3.6.0"}
	rec := httptest.NewRecorder()
	ServeVersions(rec, httptest.NewRequest(http.MethodGet, VersionsPath, nil), v)
	if got, want := rec.Body.String(), `{"etcdserver":"3.6.16","etcdcluster":"not_decided","storage":"3.6.0"}`; rec.Code != http.StatusOK || got != want {
		t.Fatalf("GET: %d %q, want 200 %q", rec.Code, got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	rec = httptest.NewRecorder()
	ServeVersions(rec, httptest.NewRequest(http.MethodPost, VersionsPath, nil), v)
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != http.MethodGet || rec.Body.String() != "Method Not Allowed\n" {
		t.Fatalf("POST: %d, Allow %q, %q", rec.Code, rec.Header().Get("Allow"), rec.Body.String())
	}
}

func TestDowngradeEnabledAsEtcd(t *testing.T) {
	enabled, readErr := true, error(nil)
	h := DowngradeEnabledHandler(DowngradeSource{
		ClusterID:        func() string { return "c1" },
		LinearizableRead: func(context.Context) error { return readErr },
		Enabled:          func() bool { return enabled },
		Timeout:          time.Second,
	})
	get := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	for _, c := range []struct {
		enabled bool
		want    string
	}{{true, "true"}, {false, "false"}} {
		enabled = c.enabled
		rec := get(http.MethodGet, DowngradeEnabledPath)
		if rec.Code != http.StatusOK || rec.Body.String() != c.want || rec.Header().Get("X-Etcd-Cluster-ID") != "c1" ||
			rec.Header().Get("Content-Type") != "text/plain" {
			t.Fatalf("enabled=%v: %d %q %v", c.enabled, rec.Code, rec.Body.String(), rec.Header())
		}
	}
	if rec := get(http.MethodPut, DowngradeEnabledPath); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d", rec.Code)
	}
	if rec := get(http.MethodGet, DowngradeEnabledPath+"/x"); rec.Code != http.StatusBadRequest || rec.Body.String() != "bad path\n" {
		t.Fatalf("bad path: %d %q", rec.Code, rec.Body.String())
	}
	readErr = errors.New("etcdserver: request timed out")
	if rec := get(http.MethodGet, DowngradeEnabledPath); rec.Code != http.StatusInternalServerError ||
		rec.Body.String() != "failed linearized read: etcdserver: request timed out\n" {
		t.Fatalf("failed read: %d %q", rec.Code, rec.Body.String())
	}
}
