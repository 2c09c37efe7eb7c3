// Package tlsutil builds the TLS configuration of MetaStore's client and
// peer listeners and of its outgoing peer connections, with etcd 3.6's
// rules (client/pkg/transport.TLSInfo) and flag semantics:
//
//   - the server certificate and key are read from disk on every new
//     handshake, so a rotated leaf takes effect without a restart (as etcd);
//   - a trusted CA file (--trusted-ca-file, --peer-trusted-ca-file) or
//     --client-cert-auth makes client certificates mandatory and verified;
//   - --client-cert-allowed-hostname, --peer-cert-allowed-cn and
//     --peer-cert-allowed-hostname accept a verified certificate only when
//     one of the names matches; otherwise the handshake fails with etcd's
//     "client certificate authentication failed";
//   - a CRL file (--client-crl-file, --peer-crl-file) is checked after the
//     handshake against every certificate of the peer's chain, on every
//     listener including the one that serves gRPC (GHSA-3wh4-j44w-pg92);
//   - a handshake that does not finish within HandshakeTimeout (10 s, as
//     etcd) is dropped, so idle half-open clients cannot pin goroutines
//     (GHSA-6vch-q96h-7gc3); each refusal is logged as etcd logs it
//     ("rejected connection on client endpoint" / "... peer endpoint").
//
// Beyond etcd, the trusted CA bundle and the CRL are reloaded too: every
// file is kept in a small cache (fileCache) keyed by its size, modification
// time and inode, and re-read when one of those changes. Replacing a file
// on disk (write then rename, or rewrite in place) therefore takes effect
// for the next connection; established connections are not disturbed.
// Server-side the CA pool is swapped in through tls.Config.GetConfigForClient;
// client-side (peer dialing) Material.ClientConfig builds a fresh
// tls.Config for each dial.
//
// Identity extraction (Identity, the CN and SAN lists used by the allowed
// name checks and by auth's CN-as-user rule) never panics on malformed
// certificates; FuzzIdentity exercises it.
package tlsutil
