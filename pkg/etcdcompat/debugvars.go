package etcdcompat

import (
	"encoding/json"
	"expvar"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"go.etcd.io/raft/v3"
)

// debugVarsPath is where etcd serves its expvar variables.
const debugVarsPath = "/debug/vars"

// RaftStatusMember is a Member that can show raft's own state: its
// /debug/vars then has raft.status, as etcd's does.
type RaftStatusMember interface {
	RaftStatus() raft.Status
}

// serveDebugVars serves /debug/vars as etcd does (etcdhttp.HandleDebug):
// GET only, one JSON object of Go's expvar variables (cmdline, memstats)
// and the two etcd adds, file_descriptor_limit and raft.status, in key
// order. etcd publishes its two in the process-wide expvar registry; they
// are computed here per request instead, so that several members in one
// process (pkg/embed) each show their own and nothing is registered
// globally.
func (s *ClientServer) serveDebugVars(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	vars := map[string]string{}
	expvar.Do(func(kv expvar.KeyValue) { vars[kv.Key] = kv.Value.String() })
	if n, ok := fileDescriptorLimit(); ok {
		vars["file_descriptor_limit"] = strconv.FormatUint(n, 10)
	}
	if rm, ok := s.cfg.Member.(RaftStatusMember); ok {
		if b, err := json.Marshal(rm.RaftStatus()); err == nil {
			vars["raft.status"] = string(b)
		}
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	fmt.Fprint(w, "{\n")
	for i, k := range keys {
		if i > 0 {
			fmt.Fprint(w, ",\n")
		}
		fmt.Fprintf(w, "%q: %s", k, vars[k])
	}
	fmt.Fprint(w, "\n}\n")
}
