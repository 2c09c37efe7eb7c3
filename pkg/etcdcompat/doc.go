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
// One RPC is etcd 3.7's, not 3.6's: KV's server-streaming RangeStream
// (kv_stream.go), served for a Member that is also a RangeStreamMember
// and codes.Unimplemented otherwise. The KV service is described here, not
// registered with etcd's generated code, which has no room for it; its
// messages are package rangestream's.
//
// # Listeners
//
// Serve takes a plaintext listener and tells gRPC (HTTP/2) from the HTTP
// endpoints (HTTP/1.1) by the connection's first bytes. ServeTLS takes a
// listener whose connections finished their TLS handshake and passed the
// certificate checks (MetaStore's tlsutil listener); it tells them apart by the first
// HTTP/2 request's content type, so gRPC keeps its own transport (etcd
// routes TLS gRPC through grpc.Server.ServeHTTP, several times slower) and
// an HTTP/2 client of /metrics or the gateway still reaches the HTTP
// server (h2filter.go). Either way the gRPC server's credentials only
// report the connection's TLS state, so a handler can read the client's
// verified certificate from its peer's credentials.TLSInfo, as etcd's
// authentication does.
//
// # Metrics
//
// The client-facing series are etcd's (metrics.go): grpc_server_* as the
// grpc-ecosystem interceptors etcd uses export them, counted by our own
// interceptors with the series looked up once per method (grpcmetrics.go;
// a test holds them to the library's output), first in the chain so
// refused requests count; the bytes of every message through a counting wrapper of
// gRPC's proto codec; client_requests_total by client API version, stream
// failures, the /health counters and the /livez and /readyz check results
// (probes.go). Children counted per request are created once and cached,
// so counting is an atomic add, never an allocation or a lock.
//
// Its exported API names only its own types and etcd's public ones, so a
// program outside MetaStore can serve etcd's API over its own Member
// (member_external_test.go does).
package etcdcompat
