// Package discovery is a service registry on MetaStore (or etcd) with a
// gRPC resolver: instances register themselves under a lease, clients list
// or watch them, and grpc.NewClient("metastore:///<service>") balances
// across the live ones.
//
// # Data layout
//
// An instance of service S at address A is one key, S + "/" + A, attached
// to a lease the instance keeps alive. Its value is the JSON record etcd's
// client/v3/naming/endpoints writes, so instances registered by etcd's
// endpoints.Manager are discovered here and the other way round, and etcd's
// own "etcd:///" resolver works on our registrations:
//
//	key:   payments/10.0.0.7:8443
//	value: {"Op":0,"Addr":"10.0.0.7:8443","Metadata":{"zone":"b"}}
//	lease: 0x694d7c1e2f0a4b11 (TTL 10 s, renewed every ~3 s)
//
// Any key under S + "/" whose value parses is an instance, whatever the
// rest of the key says (etcd lets callers choose it); values that do not
// parse are skipped.
//
// # Liveness
//
// An instance that crashes stops renewing its lease; the server deletes
// the key when the TTL runs out, watchers see the deletion, and resolvers
// drop the address. An instance that is alive but lost its lease (a
// partition longer than the TTL) registers again with a new lease as soon
// as it can reach the cluster; Unregister deletes the key and revokes the
// lease at once.
//
// # Watching
//
// Watch first reports every registered instance as Added, then each change
// in commit order. If the underlying watch fails (the server compacted the
// history it needed, or cancelled the watch), Watch lists the service
// again and reports the difference, so a watcher's view converges on the
// registry's even across such gaps.
package discovery
