package version

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// What a member answers on its peer listener (and /version on its client
// listener too) about its versions: etcd's members ask a running cluster's
// members for both before they join it, and refuse to join ("incompatible
// with current running cluster") when they cannot read the answers.
const (
	VersionsPath         = "/version"
	DowngradeEnabledPath = "/downgrade/enabled"
	// NotDecided is /version's etcdcluster before a leader has recorded a
	// cluster version.
	NotDecided = "not_decided"
)

// Versions is /version's answer, etcd's version.Versions, its fields in
// etcd's order.
type Versions struct {
	Server  string `json:"etcdserver"`
	Cluster string `json:"etcdcluster"`
	Storage string `json:"storage"`
}

// ServeVersions answers a GET with v as etcd's serveVersion does: the JSON
// without a trailing newline. Any other method gets 405 with Allow: GET.
func ServeVersions(w http.ResponseWriter, r *http.Request, v Versions) {
	if !allowGet(w, r) {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b) // a failed write means the asker went away
}

// DowngradeSource is what /downgrade/enabled reads: the member's cluster
// ID (hex), a linearizable read barrier, and whether a downgrade job is
// enabled as the member applied it.
type DowngradeSource struct {
	ClusterID        func() string
	LinearizableRead func(ctx context.Context) error
	Enabled          func() bool
	// Timeout bounds the read (etcd's request timeout).
	Timeout time.Duration
}

// DowngradeEnabledHandler answers /downgrade/enabled as etcd's
// downgradeEnabledHandler does: GET only, X-Etcd-Cluster-ID, then "true"
// or "false" (text/plain) after a linearizable read, so that the answer is
// the cluster's; a read that fails is a 500.
func DowngradeEnabledHandler(src DowngradeSource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowGet(w, r) {
			return
		}
		w.Header().Set("X-Etcd-Cluster-ID", src.ClusterID())
		if r.URL.Path != DowngradeEnabledPath {
			http.Error(w, "bad path", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), src.Timeout)
		defer cancel()
		if err := src.LinearizableRead(ctx); err != nil {
			http.Error(w, fmt.Sprintf("failed linearized read: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(strconv.FormatBool(src.Enabled())))
	})
}

func allowGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet {
		return true
	}
	w.Header().Set("Allow", http.MethodGet)
	http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	return false
}
