package server

import (
	"context"
	"errors"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
)

// clusterVersionRetry is how long a leader waits before it proposes the
// cluster version again after a failed attempt (etcd's monitor looks
// again every 4 s).
const clusterVersionRetry = time.Second

// setClusterVersion proposes the cluster version until it is recorded,
// this member stops leading in term, or the member stops. It runs when
// this member, leading in term, has applied its own first entry of the
// term and found no cluster version recorded (the state
// machine's NoticeClusterVersion): like etcd's monitorClusterVersions woken by
// FirstCommitInTermNotify, a leader proposes one (a ClusterVersionSet
// entry, as etcd's leader does once, when a new cluster starts), so that
// the raft log holds the entries etcd's does and reports the same
// indexes.
func (s *Server) setClusterVersion(term uint64) {
	version := s.cfg.ClusterVersion
	// etcd logs the version as major.minor ("3.6").
	logged := strings.Join(strings.SplitN(version, ".", 3)[:2], ".")
	s.log.Info("setting up initial cluster version using v3 API", "cluster-version", logged)
	for s.cluster.Version() == "" && s.leases.currentLeader() == s.id && s.Term() == term {
		req := &pb.InternalRaftRequest{ClusterVersionSet: &membershippb.ClusterVersionSetRequest{Ver: version}}
		ctx, cancel := context.WithTimeout(context.Background(), s.reqTimeout)
		_, err := s.propose(ctx, req)
		cancel()
		if err == nil {
			s.log.Info("cluster version is updated", "cluster-version", logged)
			return
		}
		if errors.Is(err, ErrStopped) {
			s.log.Warn("aborting cluster version update; server is stopped", "error", err)
			return
		}
		s.log.Warn("failed to update cluster version", "error", err)
		t := time.NewTimer(clusterVersionRetry)
		select {
		case <-s.stopping:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// ClusterVersion is the cluster version recorded through raft, "" until
// a leader has recorded one.
func (s *Server) ClusterVersion() string { return s.cluster.Version() }
