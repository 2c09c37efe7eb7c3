package etcdcompat

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/version"
)

// Versions MetaStore reports to etcd clients. MetaStore implements the
// etcd v3 API of this etcd release: clients that gate features on the server
// version (etcdctl, Kubernetes) must see an etcd 3.6 member.
const (
	// EtcdServerVersion is reported as Status.version and /version's etcdserver.
	EtcdServerVersion = "3.6.16"
	// EtcdClusterVersion is the cluster version a leader records (etcd's
	// ClusterVersionSet) and /version's etcdcluster once recorded.
	EtcdClusterVersion = "3.6.0"
	// StorageVersion is reported as Status.storageVersion.
	StorageVersion = "3.6.0"
)

// clusterVersionNotDecided is /version's etcdcluster before a leader has
// recorded the cluster version, as etcd says it.
const clusterVersionNotDecided = version.NotDecided

// ClusterVersionMember is a Member that reports the cluster version
// recorded through raft ("" until a leader has recorded one). A Member
// without it is taken to run at EtcdClusterVersion.
type ClusterVersionMember interface {
	ClusterVersion() string
}

// clusterVersionOf is /version's etcdcluster for m.
func clusterVersionOf(m Member) string {
	cvm, ok := m.(ClusterVersionMember)
	if !ok {
		return EtcdClusterVersion
	}
	if v := cvm.ClusterVersion(); v != "" {
		return v
	}
	return clusterVersionNotDecided
}

// DowngradeMember is a Member that serves Maintenance.Downgrade (etcd's
// downgrade validate, enable and cancel) and reports its downgrade job
// in Maintenance.Status; the service answers codes.Unimplemented for a
// member that does not. Downgrade returns etcd's errors as Member's
// methods do.
type DowngradeMember interface {
	Downgrade(ctx context.Context, r *pb.DowngradeRequest) (*pb.DowngradeResponse, error)
	// DowngradeInfo is the downgrade job as this member applied it.
	DowngradeInfo() (enabled bool, target string)
}

// storageVersionOf is Status.storageVersion and /version's storage for
// m. etcd's storage version follows the cluster version (its members
// migrate their backend's schema to it, down to 3.5 while a downgrade
// is under way); MetaStore reports the cluster version it recorded, and
// StorageVersion until one is.
func storageVersionOf(m Member) string {
	if cvm, ok := m.(ClusterVersionMember); ok {
		if v := cvm.ClusterVersion(); v != "" {
			return v
		}
	}
	return StorageVersion
}
