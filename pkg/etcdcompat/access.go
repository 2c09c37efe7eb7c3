package etcdcompat

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// accessController is etcd's front for HTTP client requests: the /v3beta/
// prefix rewritten to /v3/, the Host header checked against
// --host-whitelist on plain-HTTP connections (DNS rebinding, CVE-2018-5702),
// CORS headers from --cors, and OPTIONS answered without reaching the
// endpoints.
type accessController struct {
	next          http.Handler
	cors          map[string]bool // empty or "*": any origin
	hostWhitelist map[string]bool // empty or "*": any host
	log           *slog.Logger
}

func newAccessController(next http.Handler, cors, hosts []string, log *slog.Logger) *accessController {
	set := func(list []string) map[string]bool {
		m := map[string]bool{}
		for _, v := range list {
			if v = strings.TrimSpace(v); v != "" {
				m[v] = true
			}
		}
		return m
	}
	return &accessController{next: next, cors: set(cors), hostWhitelist: set(hosts), log: log}
}

func allowed(m map[string]bool, v string) bool {
	return len(m) == 0 || m["*"] || m[v]
}

func (ac *accessController) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v3beta/") {
		r.URL.Path = strings.Replace(r.URL.Path, "/v3beta/", "/v3/", 1)
	}
	if r.TLS == nil {
		host := r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			host = h
		}
		if !allowed(ac.hostWhitelist, host) {
			ac.log.Warn("rejecting HTTP request to prevent DNS rebinding attacks", "host", host)
			http.Error(w, hostRejected(host), http.StatusMisdirectedRequest)
			return
		}
	}
	if ac.cors["*"] || len(ac.cors) == 0 {
		addCORSHeader(w, "*")
	} else if origin := r.Header.Get("Origin"); ac.cors[origin] {
		addCORSHeader(w, origin)
	}
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusOK)
		return
	}
	ac.next.ServeHTTP(w, r)
}

func addCORSHeader(w http.ResponseWriter, origin string) {
	w.Header().Add("Access-Control-Allow-Methods", "POST, GET, OPTIONS, PUT, DELETE")
	w.Header().Add("Access-Control-Allow-Origin", origin)
	w.Header().Add("Access-Control-Allow-Headers", "accept, content-type, authorization")
}

// hostRejected is etcd's body for a request whose Host is not whitelisted.
func hostRejected(host string) string {
	return fmt.Sprintf(`
etcd received your request, but the Host header was unrecognized.

To fix this, choose one of the following options:
- Enable TLS, then any HTTPS request will be allowed.
- Add the hostname you want to use to the whitelist in settings.
  - e.g. etcd --host-whitelist %q

This requirement has been added to help prevent "DNS Rebinding" attacks (CVE-2018-5702).
`, host)
}
