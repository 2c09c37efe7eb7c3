package server

import (
	"net/http"
	"time"

	"github.com/metastore-io/metastore/internal/cluster/corruption"
	"github.com/metastore-io/metastore/internal/cluster/membership"
)

// PeerHandler serves the peer listener (--listen-peer-urls): the peer
// transport, and /members.
func (s *Server) PeerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(membership.MembersPath, func(w http.ResponseWriter, r *http.Request) {
		membership.ServeMembers(w, r, s.cluster, s.log)
	})
	mux.HandleFunc(corruption.PeerHashKVPath, s.corruption.ServeHashKV)
	if s.transport != nil {
		mux.Handle("/", s.transport.Handler())
	}
	return mux
}

// syncPeers brings the transport in line with the member list, and stops
// this member once the list says it was removed. It runs after every
// membership change and snapshot restore (apply goroutine), and in New.
func (s *Server) syncPeers() {
	s.peers.Sync(s.log, s.transport, s.cluster.Members(), s.cluster.IsRemoved)
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

// ConfigurePeerServer prepares the HTTP server of the peer listener for
// the transport (HTTP/1.1, as etcd's peer listener); serve PeerHandler on it.
func (s *Server) ConfigurePeerServer(srv *http.Server) {
	if s.transport != nil {
		s.transport.ConfigureServer(srv)
	}
}
