package server

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
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
	logged := membership.MajorMinor(version)
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

// monitorVersionInterval is how often the leader looks whether the
// cluster version should change, etcd's monitorVersionInterval
// (rafthttp's 5 s connection write timeout less a second).
const monitorVersionInterval = 4 * time.Second

// monitorClusterVersion is etcd's monitorClusterVersions once the
// cluster version is recorded: every monitorVersionInterval the leader
// decides it again (membership.NextClusterVersion) and records a change
// with a ClusterVersionSet entry. It moves to a downgrade job's target
// once the job is enabled, and back up to the members' version once the
// job is cancelled. The members' lowest server version is this member's:
// MetaStore's members do not ask each other theirs, and every MetaStore
// member reports itself as etcd Config.ServerVersion. It runs from
// startServing until the member stops.
func (s *Server) monitorClusterVersion() {
	s.everyIntervalWhileLeading(monitorVersionInterval, func() {
		cv := s.cluster.Version()
		next, ok, err := membership.NextClusterVersion(cv, s.cfg.ServerVersion, s.cluster.Downgrade())
		if err != nil {
			s.log.Error("Failed to monitor cluster version", "error", err)
		}
		if ok {
			s.updateClusterVersion(cv, next)
		}
	})
}

// updateClusterVersion proposes the cluster version once, as etcd's
// updateClusterVersionV3: a failure is logged, and the next look of the
// monitor tries again.
func (s *Server) updateClusterVersion(from, to string) {
	s.log.Info("updating cluster version using v3 API", "from", membership.MajorMinor(from), "to", membership.MajorMinor(to))
	req := &pb.InternalRaftRequest{ClusterVersionSet: &membershippb.ClusterVersionSetRequest{Ver: to}}
	ctx, cancel := context.WithTimeout(context.Background(), s.reqTimeout)
	_, err := s.propose(ctx, req)
	cancel()
	switch {
	case err == nil:
		s.log.Info("cluster version is updated", "cluster-version", membership.MajorMinor(to))
		if d := s.cluster.Downgrade(); d.Enabled && d.TargetVersion == to {
			// etcd says so once its storage follows the cluster
			// version; MetaStore's storage version is the cluster
			// version itself.
			s.log.Info("The server is ready to downgrade", "target-version", d.TargetVersion, "server-version", s.cfg.ServerVersion)
		}
	case errors.Is(err, ErrStopped):
		s.log.Warn("aborting cluster version update; server is stopped", "error", err)
	default:
		s.log.Warn("failed to update cluster version", "error", err)
	}
}
