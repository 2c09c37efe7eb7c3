// Command metastore runs a MetaStore member: an etcd v3-compatible
// metadata server replicated with Raft.
//
//	metastore [flags]        serve (etcd's flag names and defaults)
//	metastore version        print versions
//	metastore snapshot status FILE           etcdutl snapshot status for
//	metastore snapshot restore FILE [flags]  the files `etcdctl snapshot
//	                                         save` fetches from a member
//
// Flags may also come from the environment as ETCD_<FLAG> or
// METASTORE_<FLAG> (for example ETCD_NAME, METASTORE_DATA_DIR). A bad flag
// prints one line and exits with status 2; SIGTERM or SIGINT stops the
// member gracefully (in-flight requests drained, WAL closed cleanly).
package main
