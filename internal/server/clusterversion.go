package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/cluster/version"
)

// The cluster version and the downgrade job are package version's
// (version.Keeper); the member gives it raft and runs its monitor.

// versionMember is the member as the version keeper sees it.
type versionMember struct{ *Server }

func (m versionMember) Cluster() *membership.Cluster { return m.cluster }

func (m versionMember) Leads(term uint64) bool {
	return m.leases.currentLeader() == m.id && m.Term() == term
}

func (m versionMember) Propose(ctx context.Context, req *pb.InternalRaftRequest) error {
	_, err := m.propose(ctx, req)
	return err
}

// monitorClusterVersion is etcd's monitorClusterVersions: the leader's
// look at the cluster version every version.MonitorInterval, from
// startServing until the member stops.
func (s *Server) monitorClusterVersion() {
	s.everyIntervalWhileLeading(version.MonitorInterval, s.versions.Check)
}

// ClusterVersion is the cluster version recorded through raft, "" until
// a leader has recorded one.
func (s *Server) ClusterVersion() string { return s.cluster.Version() }

// Downgrade serves Maintenance.Downgrade (version.Keeper.Downgrade).
func (s *Server) Downgrade(ctx context.Context, r *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
	return s.versions.Downgrade(ctx, r)
}

// DowngradeInfo is the downgrade job as this member last applied it, for
// Maintenance.Status.
func (s *Server) DowngradeInfo() (enabled bool, target string) {
	d := s.cluster.Downgrade()
	return d.Enabled, d.TargetVersion
}
