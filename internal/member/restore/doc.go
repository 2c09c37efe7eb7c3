// Package restore builds the data dir of a member of a new cluster from a
// snapshot file, for `metastore snapshot restore` (etcdutl's `snapshot
// restore`): a file `etcdctl snapshot save` took from MetaStore (package
// backup's format) or from etcd (package etcddb's).
//
// It runs offline, before any member starts, and builds the dir with the
// code a member runs: the storage engine, the MVCC store over it, the
// member list of package membership, and raftnode's files seeded with a
// snapshot recorded as installed (raftnode.SeedAt). The member and
// cluster IDs are membership.NewBootstrap's, the ones a member started
// with the same --name, --initial-cluster, --initial-cluster-token and
// --initial-advertise-peer-urls derives.
package restore
