// Command metastore runs a MetaStore member: an etcd v3-compatible
// metadata server replicated with Raft.
//
//	metastore [flags]        serve (etcd's flag names and defaults)
//	metastore version        print versions
//	metastore snapshot status FILE           etcdutl snapshot status for
//	metastore snapshot restore FILE [flags]  the files `etcdctl snapshot
//	                                         save` fetches from a member
//	metastore gateway start [flags]          etcd's L4 gateway (gateway.go)
//
// The serve flags are etcd 3.6's whole command line, one file per area
// (flags_<area>.go, all registered from options.register), plus
// --config-file (configfile.go: etcd's YAML, which replaces every other
// flag and variable). Flags may also come from the environment as
// ETCD_<FLAG> or METASTORE_<FLAG> (for example ETCD_NAME,
// METASTORE_DATA_DIR). An unknown flag is refused as etcd refuses it
// (exit 2); a configuration etcd would refuse is logged as "failed to
// verify flags" (exit 1). SIGTERM or SIGINT stops the member gracefully
// (in-flight requests drained, WAL closed cleanly).
//
// TLS (flags_tls.go) takes etcd's client and peer flags: every https://
// listen URL is wrapped in a tlsutil listener (certificates re-read from
// disk for new connections, CRL checked, refusals logged as etcd does),
// and the member dials its peers with the peer certificates.
package main
