package etcdcompat

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
const clusterVersionNotDecided = "not_decided"

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
