package etcdcompat

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// etcd's /livez and /readyz (etcdhttp's check registries): each runs named
// checks, answers "ok" when all pass and a "[-]name failed: reason" list
// with 503 when one fails, serves every check alone under its own path
// (/readyz/linearizable_read), leaves out those named by ?exclude=, lists
// the results with ?verbose, and records each result in
// etcd_server_healthcheck{type,name} and etcd_server_healthchecks_total.

// probeTimeout bounds a probe's read checks.
const probeTimeout = 5 * time.Second

// probeCheck is one named check of a probe.
type probeCheck struct {
	name string
	run  func(ctx context.Context) error
}

// probes are the checks of /livez and /readyz, in etcd's order.
func (s *ClientServer) probes() map[string][]probeCheck {
	read := func(serializable bool) func(context.Context) error {
		return func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			_, err := s.cfg.Member.Range(ctx, &pb.RangeRequest{Key: []byte("health"), KeysOnly: true, Limit: 1, Serializable: serializable})
			return err
		}
	}
	return map[string][]probeCheck{
		"livez": {{"serializable_read", read(true)}},
		"readyz": {
			{"data_corruption", func(context.Context) error {
				for _, a := range s.cfg.Member.Alarms() {
					if a.Alarm == pb.AlarmType_CORRUPT {
						return fmt.Errorf("alarm activated: %s", a.Alarm)
					}
				}
				return nil
			}},
			{"serializable_read", read(true)},
			{"linearizable_read", read(false)},
			{"non_learner", func(context.Context) error {
				if s.cfg.Member.IsLearner() {
					return fmt.Errorf("not supported for learner")
				}
				return nil
			}},
		},
	}
}

// handleProbes adds /livez and /readyz and their per-check paths to mux.
func (s *ClientServer) handleProbes(mux *http.ServeMux) {
	for kind, checks := range s.probes() {
		mux.Handle("/"+kind, s.probeHandler(kind, checks, true))
		for _, c := range checks {
			mux.Handle("/"+kind+"/"+c.name, s.probeHandler(kind, []probeCheck{c}, false))
		}
	}
}

func (s *ClientServer) probeHandler(kind string, checks []probeCheck, root bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		run := checks
		if root {
			run = s.withoutExcluded(kind, checks, querySet(r, "exclude"))
		}
		var report strings.Builder
		failed := false
		for _, c := range run {
			err := c.run(r.Context())
			s.m.recordCheck(kind, c.name, err)
			if err != nil {
				failed = true
				fmt.Fprintf(&report, "[-]%s failed: %v\n", c.name, err)
			} else {
				fmt.Fprintf(&report, "[+]%s ok\n", c.name)
			}
		}
		if failed {
			http.Error(w, report.String(), http.StatusServiceUnavailable)
			s.log.Error("Health check error", "path", r.URL.Path, "reason", report.String(), "status-code", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, verbose := r.URL.Query()["verbose"]; verbose {
			_, _ = w.Write([]byte(report.String()))
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}

// withoutExcluded drops the excluded checks, warning about names that
// are not checks, as etcd does.
func (s *ClientServer) withoutExcluded(kind string, checks []probeCheck, excluded []string) []probeCheck {
	if len(excluded) == 0 {
		return checks
	}
	var out []probeCheck
	for _, c := range checks {
		if !slices.Contains(excluded, c.name) {
			out = append(out, c)
		}
	}
	for _, name := range excluded {
		if !slices.ContainsFunc(checks, func(c probeCheck) bool { return c.name == name }) {
			s.log.Warn("some health checks cannot be excluded", "missing-health-checks", name, "probe", kind)
		}
	}
	return out
}

// querySet is every comma-separated value of a repeated query parameter.
func querySet(r *http.Request, name string) []string {
	var out []string
	for _, v := range r.URL.Query()[name] {
		for _, part := range strings.Split(v, ",") {
			if part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}
