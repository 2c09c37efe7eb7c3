package etcdcompat

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	gw "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
)

// TestPprofServedOnlyWhenEnabled checks etcd's --enable-pprof contract: the
// profiles are under /debug/pprof/ on the client port when enabled, and
// absent otherwise.
func TestPprofServedOnlyWhenEnabled(t *testing.T) {
	paths := []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline", "/debug/pprof/allocs?debug=1"}
	for _, enabled := range []bool{false, true} {
		s := &ClientServer{cfg: Config{EnablePprof: enabled}}
		mux := s.httpMux(gw.NewServeMux())
		for _, p := range paths {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
			if !enabled {
				if rec.Code != http.StatusNotFound {
					t.Errorf("pprof disabled: GET %s = %d, want 404", p, rec.Code)
				}
				continue
			}
			if rec.Code != http.StatusOK {
				t.Errorf("pprof enabled: GET %s = %d, want 200", p, rec.Code)
			}
		}
		if enabled {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap?debug=1", nil))
			if !strings.Contains(rec.Body.String(), "heap profile") {
				t.Errorf("GET /debug/pprof/heap?debug=1: body is not a heap profile: %.100q", rec.Body.String())
			}
		}
	}
}
