package rafthttp

import (
	"encoding/json"
	"net/http"
	"time"
)

// ProbingPath is where etcd's members probe their peers: every 5 s, each
// member GETs it from every peer, logs the peer unhealthy when the probe
// fails and warns of clock drift over a second from Now.
const ProbingPath = "/raft/probing"

// probeAnswer is the answer's JSON (github.com/xiang90/probing's Health).
type probeAnswer struct {
	OK  bool
	Now time.Time
}

// ProbingHandler answers etcd's probes as etcd's handler does: OK and
// this member's clock, to anyone (the probe carries no headers to check).
func ProbingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// An encoding error means the prober went away; it will probe again.
		_ = json.NewEncoder(w).Encode(probeAnswer{OK: true, Now: time.Now()})
	})
}
