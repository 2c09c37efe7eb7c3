package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// The peer listener serves the transport and, beside it, etcd's GET
// /members: the member list as JSON with the cluster ID in the
// X-Etcd-Cluster-ID header. A member joining with
// --initial-cluster-state=existing reads it to learn its ID. The format is
// etcd's, e.g.
//
//	X-Etcd-Cluster-ID: 6ad1a2b1b3b7b5a1
//	[{"id":10276657743932975437,"name":"m0","peerURLs":["http://127.0.0.1:2380"],
//	  "clientURLs":["http://127.0.0.1:2379"]}]
const (
	MembersPath     = "/members"
	ClusterIDHeader = "X-Etcd-Cluster-ID"
	// maxMembersBody bounds the member list read from a peer.
	maxMembersBody = 1 << 20
)

// MemberJSON is one member in etcd's /members format.
type MemberJSON struct {
	ID         uint64   `json:"id"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner,omitempty"`
}

// Remote is a running cluster's member list as a peer reported it.
type Remote struct {
	ClusterID uint64
	Members   []MemberJSON
}

// ServeMembers answers a peer's GET /members with c's member list, in
// etcd's format.
func ServeMembers(w http.ResponseWriter, r *http.Request, c *Cluster, log *slog.Logger) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	members := c.Members()
	out := make([]MemberJSON, len(members))
	for i, m := range members {
		out[i] = MemberJSON{ID: m.ID}
		if ra := m.RaftAttributes; ra != nil {
			out[i].PeerURLs, out[i].IsLearner = ra.PeerUrls, ra.IsLearner
		}
		if ma := m.MemberAttributes; ma != nil {
			out[i].Name, out[i].ClientURLs = ma.Name, ma.ClientUrls
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(ClusterIDHeader, strconv.FormatUint(c.ID(), 16))
	if err := json.NewEncoder(w).Encode(out); err != nil {
		log.Warn("write member list to peer", "remote", r.RemoteAddr, "error", err)
	}
}

// FetchMembers asks each of urls in turn for the running cluster's
// member list (a joining member's --initial-cluster-state=existing), each
// for at most perURL, and returns the first answer.
func FetchMembers(ctx context.Context, client *http.Client, urls []string, perURL time.Duration) (Remote, error) {
	var errs []error
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(ctx, perURL)
		rc, err := getMembers(ctx, client, u)
		cancel()
		if err == nil {
			return rc, nil
		}
		errs = append(errs, err)
	}
	return Remote{}, errors.Join(errs...)
}

// getMembers fetches the member list from one peer URL.
func getMembers(ctx context.Context, client *http.Client, peerURL string) (Remote, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+MembersPath, nil)
	if err != nil {
		return Remote{}, fmt.Errorf("get members from %s: %w", peerURL, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Remote{}, fmt.Errorf("get members from %s: %w", peerURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMembersBody))
	if err != nil {
		return Remote{}, fmt.Errorf("get members from %s: read body: %w", peerURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Remote{}, fmt.Errorf("get members from %s: %s", peerURL, resp.Status)
	}
	rc, err := DecodeMembers(resp.Header.Get(ClusterIDHeader), body)
	if err != nil {
		return Remote{}, fmt.Errorf("get members from %s: %w", peerURL, err)
	}
	return rc, nil
}

// DecodeMembers parses a /members answer.
func DecodeMembers(clusterIDHex string, body []byte) (Remote, error) {
	id, err := strconv.ParseUint(clusterIDHex, 16, 64)
	if err != nil || id == 0 {
		return Remote{}, fmt.Errorf("bad %s header %q", ClusterIDHeader, clusterIDHex)
	}
	var members []MemberJSON
	if err := json.Unmarshal(body, &members); err != nil {
		return Remote{}, fmt.Errorf("decode member list: %w", err)
	}
	if len(members) == 0 {
		return Remote{}, errors.New("the member list is empty")
	}
	for _, m := range members {
		if m.ID == 0 || len(m.PeerURLs) == 0 {
			return Remote{}, fmt.Errorf("member list has a member without ID or peer URLs: %+v", m)
		}
	}
	return Remote{ClusterID: id, Members: members}, nil
}
