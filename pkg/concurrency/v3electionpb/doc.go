// Package v3electionpb is etcd's v3election gRPC protocol - the Election
// service ("/v3electionpb.Election/Campaign", Proclaim, Leader, Observe,
// Resign) and its messages - written out by hand, so that MetaStore serves
// it and Go programs call it without depending on etcd's server module.
//
// As in package v3lockpb, the messages are Go structs whose protobuf struct
// tags carry the field numbers, types and names of etcd's v3election.proto,
// whose XXX_MessageName is etcd's, and which have generated code's nil-safe
// getters; google.golang.org/protobuf encodes them from the tags, byte for
// byte as etcd's generated code does. Headers and key-values are etcd's own
// etcdserverpb and mvccpb types.
//
// The service: Campaign blocks until the caller's lease leads the named
// election and returns a LeaderKey; Proclaim changes the leader's value;
// Resign gives leadership up; Leader reads the current leader; Observe
// streams the leader's value and every change of leader.
package v3electionpb
