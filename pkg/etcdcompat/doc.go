// Package etcdcompat is MetaStore's client face: etcd's v3 gRPC services
// (KV, Watch, Lease, Maintenance, Cluster, v3lock and v3election), the
// JSON gateway and the HTTP endpoints (/health, /version, /metrics, and
// /debug/pprof/ with --enable-pprof) served on the client port exactly as
// etcd 3.6 serves them.
//
// It translates; it decides nothing. Each RPC validates its request the
// way etcd's v3rpc layer does (so the same bad request gets the same gRPC
// code and message before anything is proposed), hands it to the Member,
// fills the response header (cluster ID, member ID, revision, Raft term)
// and maps errors to etcd's rpctypes statuses through one table
// (errors.go). No state lives here.
//
// Its exported API names only its own types and etcd's public ones, so a
// program outside MetaStore can serve etcd's API over its own Member
// (member_external_test.go does).
package etcdcompat
