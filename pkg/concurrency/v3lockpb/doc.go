// Package v3lockpb is etcd's v3lock gRPC protocol - the Lock service
// ("/v3lockpb.Lock/Lock", "/v3lockpb.Lock/Unlock") and its messages -
// written out by hand, so that MetaStore serves it and Go programs call it
// without depending on etcd's server module, where etcd keeps the generated
// code.
//
// The messages are plain Go structs with protobuf struct tags, the field
// numbers, types and names of etcd's v3lock.proto, etcd's message names
// (XXX_MessageName) and the nil-safe getters generated code has.
// google.golang.org/protobuf encodes them from the tags, so the bytes on
// the wire are exactly what etcd's generated (gogo) code produces and either
// side can talk to the other; MetaStore's JSON gateway (pkg/etcdcompat)
// reads the same tags for etcd's JSON field names. The response headers are
// etcd's own etcdserverpb.ResponseHeader.
//
// The service: Lock waits until the lock called Name is free and takes it
// under the caller's lease, returning the key that represents ownership;
// Unlock deletes that key. The lock is released when the lease expires.
package v3lockpb
