package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/membershippb"

	"github.com/metastore-io/metastore/internal/cluster/corruption"
	"github.com/metastore-io/metastore/internal/cluster/transport"
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
	membersPath     = "/members"
	clusterIDHeader = "X-Etcd-Cluster-ID"
	// maxMembersBody bounds the member list read from a peer.
	maxMembersBody = 1 << 20
)

// memberJSON is one member in etcd's /members format.
type memberJSON struct {
	ID         uint64   `json:"id"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner,omitempty"`
}

// remoteCluster is a running cluster's member list as a peer reported it.
type remoteCluster struct {
	ClusterID uint64
	Members   []memberJSON
}

// PeerHandler serves the peer listener (--listen-peer-urls): the peer
// transport, and /members.
func (s *Server) PeerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(membersPath, s.serveMembers)
	mux.HandleFunc(corruption.PeerHashKVPath, s.corruption.ServeHashKV)
	if s.transport != nil {
		mux.Handle("/", s.transport.Handler())
	}
	return mux
}

func (s *Server) serveMembers(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	members := s.cluster.Members()
	out := make([]memberJSON, len(members))
	for i, m := range members {
		out[i] = memberJSON{ID: m.ID}
		if ra := m.RaftAttributes; ra != nil {
			out[i].PeerURLs, out[i].IsLearner = ra.PeerUrls, ra.IsLearner
		}
		if ma := m.MemberAttributes; ma != nil {
			out[i].Name, out[i].ClientURLs = ma.Name, ma.ClientUrls
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(clusterIDHeader, strconv.FormatUint(s.cluster.ID(), 16))
	if err := json.NewEncoder(w).Encode(out); err != nil {
		s.log.Warn("write member list to peer", "remote", r.RemoteAddr, "error", err)
	}
}

// getMembers fetches the member list from one peer URL.
func getMembers(ctx context.Context, client *http.Client, peerURL string) (remoteCluster, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+membersPath, nil)
	if err != nil {
		return remoteCluster{}, fmt.Errorf("get members from %s: %w", peerURL, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return remoteCluster{}, fmt.Errorf("get members from %s: %w", peerURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMembersBody))
	if err != nil {
		return remoteCluster{}, fmt.Errorf("get members from %s: read body: %w", peerURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return remoteCluster{}, fmt.Errorf("get members from %s: %s", peerURL, resp.Status)
	}
	rc, err := decodeMembers(resp.Header.Get(clusterIDHeader), body)
	if err != nil {
		return remoteCluster{}, fmt.Errorf("get members from %s: %w", peerURL, err)
	}
	return rc, nil
}

// decodeMembers parses a /members answer.
func decodeMembers(clusterIDHex string, body []byte) (remoteCluster, error) {
	id, err := strconv.ParseUint(clusterIDHex, 16, 64)
	if err != nil || id == 0 {
		return remoteCluster{}, fmt.Errorf("bad %s header %q", clusterIDHeader, clusterIDHex)
	}
	var members []memberJSON
	if err := json.Unmarshal(body, &members); err != nil {
		return remoteCluster{}, fmt.Errorf("decode member list: %w", err)
	}
	if len(members) == 0 {
		return remoteCluster{}, errors.New("the member list is empty")
	}
	for _, m := range members {
		if m.ID == 0 || len(m.PeerURLs) == 0 {
			return remoteCluster{}, fmt.Errorf("member list has a member without ID or peer URLs: %+v", m)
		}
	}
	return remoteCluster{ClusterID: id, Members: members}, nil
}

// syncPeers brings the transport in line with the member list, and stops
// this member once the list says it was removed. It runs after every
// membership change and snapshot restore (apply goroutine), and in New.
func (s *Server) syncPeers() {
	s.peers.sync(s.log, s.transport, s.cluster.Members(), s.cluster.IsRemoved)
	s.learner.Store(s.cluster.IsLearner(s.id))
	if s.cluster.IsRemoved(s.id) {
		s.removedFromCluster()
	}
}

// activeSince is when the stream to member id came up; zero while it is
// down or id is not a peer.
func (s *Server) activeSince(id uint64) time.Time {
	if s.transport == nil {
		return time.Time{}
	}
	st, ok := s.transport.PeerStatus(id)
	if !ok || !st.Active {
		return time.Time{}
	}
	return st.Since
}

// peerSet keeps the transport's peers in line with the member list. It is
// used from the apply goroutine (and from New before raft starts), so it
// needs no lock.
type peerSet struct {
	self  uint64
	known map[uint64][]string
}

func newPeerSet(self uint64) *peerSet {
	return &peerSet{self: self, known: map[uint64][]string{}}
}

// seed adds peers known before the member list is (bootstrap flags, or
// the running cluster's list when joining).
func (p *peerSet) seed(log *slog.Logger, t *transport.Transport, peers map[uint64][]string) {
	for id, urls := range peers {
		p.set(log, t, id, urls)
	}
}

// sync adds new members, updates changed peer URLs and removes members
// that were removed from the cluster. A peer not (yet) in the list but not
// removed either is kept: a joining member learns the list only after it
// talked to the leader.
func (p *peerSet) sync(log *slog.Logger, t *transport.Transport, members []*membershippb.Member, isRemoved func(uint64) bool) {
	for _, m := range members {
		if m.RaftAttributes != nil {
			p.set(log, t, m.ID, m.RaftAttributes.PeerUrls)
		}
	}
	for id := range p.known {
		if isRemoved(id) {
			t.RemovePeer(id)
			delete(p.known, id)
		}
	}
}

func (p *peerSet) set(log *slog.Logger, t *transport.Transport, id uint64, urls []string) {
	if id == p.self || len(urls) == 0 {
		return
	}
	if old, ok := p.known[id]; ok && slices.Equal(old, urls) {
		return
	}
	// AddPeer also updates the URLs of a known peer.
	if err := t.AddPeer(id, urls); err != nil {
		// Only unusable URLs (validated before they were replicated) or
		// a stopped transport get here; the member stays unreachable.
		log.Error("cannot reach peer", "peer", fmt.Sprintf("%x", id), "urls", urls, "error", err)
		return
	}
	p.known[id] = slices.Clone(urls)
}

// ConfigurePeerServer prepares the HTTP server of the peer listener for
// the transport (cleartext HTTP/2 and its limits); serve PeerHandler on it.
func (s *Server) ConfigurePeerServer(srv *http.Server) {
	if s.transport != nil {
		s.transport.ConfigureServer(srv)
	}
}

// peerHTTPClient asks peers outside the transport (the member list when
// joining, hashes for the corruption checks), over TLS with the member's
// peer certificates when it has them (as etcd's rafthttp round tripper),
// each connection with the files as they are. timeout 0: none.
func peerHTTPClient(peerTLS transport.ClientTLS, timeout time.Duration) *http.Client {
	client := &http.Client{Timeout: timeout}
	if peerTLS == nil {
		return client
	}
	client.Transport = &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			cfg, err := peerTLS.ClientConfig("")
			if err != nil {
				return nil, err
			}
			if cfg.ServerName == "" {
				cfg.ServerName, _, _ = net.SplitHostPort(addr)
			}
			d := &tls.Dialer{Config: cfg}
			return d.DialContext(ctx, network, addr)
		},
	}
	return client
}
