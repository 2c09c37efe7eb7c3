// Package etcdcompat is MetaStore's client face: etcd's v3 gRPC services
// (KV, Maintenance, Cluster, and later Watch, Lease, Auth), the JSON gateway
// and the HTTP endpoints (/health, /version, /metrics, and /debug/pprof/
// with --enable-pprof) served on the client port exactly as etcd 3.6
// serves them.
//
// It translates; it decides nothing. Each RPC validates its request the way
// etcd's v3rpc layer does (so the same bad request gets the same gRPC code
// and message before anything is proposed), hands it to the member
// (internal/server), fills the response header (cluster ID, member ID,
// revision, Raft term) and maps errors to etcd's rpctypes statuses through
// one table (errors.go). No state lives here.
package etcdcompat
