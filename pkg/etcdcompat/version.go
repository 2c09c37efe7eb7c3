package etcdcompat

// Versions MetaStore reports to etcd clients. MetaStore implements the
// etcd v3 API of this etcd release: clients that gate features on the server
// version (etcdctl, Kubernetes) must see an etcd 3.6 member.
const (
	// EtcdServerVersion is reported as Status.version and /version's etcdserver.
	EtcdServerVersion = "3.6.16"
	// EtcdClusterVersion is /version's etcdcluster.
	EtcdClusterVersion = "3.6.0"
	// StorageVersion is reported as Status.storageVersion.
	StorageVersion = "3.6.0"
)
