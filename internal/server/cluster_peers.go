package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/metastore-io/metastore/internal/cluster/corruption"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
	"github.com/metastore-io/metastore/internal/cluster/version"
	"github.com/metastore-io/metastore/internal/format/etcddb"
)

// PeerHandler serves the peer listener (--listen-peer-urls): the peer
// transport, /members, and the versions etcd's members ask of a running
// cluster before they join it (/version, /downgrade/enabled).
func (s *Server) PeerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(membership.MembersPath, func(w http.ResponseWriter, r *http.Request) {
		membership.ServeMembers(w, r, s.cluster, s.log)
	})
	mux.HandleFunc(corruption.PeerHashKVPath, s.corruption.ServeHashKV)
	mux.HandleFunc(version.VersionsPath, func(w http.ResponseWriter, r *http.Request) {
		version.ServeVersions(w, r, s.peerVersions())
	})
	mux.Handle(version.DowngradeEnabledPath, version.DowngradeEnabledHandler(version.DowngradeSource{
		ClusterID:        func() string { return fmt.Sprintf("%x", s.ClusterID()) },
		LinearizableRead: s.LinearizableRead,
		Enabled:          func() bool { enabled, _ := s.DowngradeInfo(); return enabled },
		Timeout:          s.reqTimeout,
	}))
	if s.transport != nil {
		mux.Handle("/", s.transport.Handler())
	}
	return mux
}

// peerVersions is what /version says on the peer listener: what the
// client listener's says (pkg/etcdcompat), the server version the
// transport announces, the recorded cluster version, and the storage
// version following it.
func (s *Server) peerVersions() version.Versions {
	v := version.Versions{Server: rafthttp.ServerVersion, Cluster: version.NotDecided, Storage: etcddb.StorageVersion}
	if cv := s.ClusterVersion(); cv != "" {
		v.Cluster, v.Storage = cv, cv
	}
	return v
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
