// Package member is the composition root: it builds one whole MetaStore
// member from its parts and owns what joins them. The metastore command
// (cmd/metastore) and the embedded member (pkg/embed) both start members
// through it, and nothing else puts the parts together.
//
//	cmd/metastore, pkg/embed
//	  └─▶ internal/member              this package: builds and wires
//	       ├─▶ internal/server         the member runtime: Raft, apply, reads
//	       ├─▶ pkg/etcdcompat          etcd's client services over a Member
//	       └─▶ internal/lockservice    the HTTP lock service, one of them
//
// The runtime knows nothing of the client services and the client
// services know the runtime only as the etcdcompat.Member interface
// (clientMember adapts one to the other), so neither reaches into the
// other; this package is the only one that imports both.
//
// # Order
//
// Start builds in one direction: the server (which owns the peer
// listeners and serves peers at once), then the client services over
// it, served on the client listeners once the member is ready. Stopping
// runs the other way, whether by Stop or because the member stopped on
// its own: the server calls back (server.Config.BeforeStop) before any
// of its parts stops, the watch streams have ended, and the client
// services drain the requests in flight for up to drainTimeout and
// close their listeners; then the server stops its parts.
package member
