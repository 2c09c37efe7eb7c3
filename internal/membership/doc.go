// Package membership holds the cluster's member list: who the members are,
// their IDs, peer and client URLs, and which of them are learners.
//
// IDs are derived exactly as etcd derives them, so a MetaStore cluster
// started with the same flags as an etcd cluster reports the same member and
// cluster IDs:
//
//	member ID  = first 8 bytes (big endian) of
//	             sha1(sorted peer URLs joined with "" + initial-cluster-token [+ unix seconds when added at runtime])
//	cluster ID = first 8 bytes (big endian) of sha1(the sorted member IDs, 8 bytes big endian each)
//
// For example `--name default --initial-advertise-peer-urls http://localhost:2380`
// with the default token "etcd-cluster" gives member 8e9e05c52164694d, as etcd.
//
// The member list is replicated state: it changes only when a committed Raft
// entry is applied (a conf change or a ClusterMemberAttrSet request), in the
// same order on every member. It is persisted as protobuf
// (membershippb.Member) in the store's auxiliary bucket 'c', written in the
// same batch as the entry that changed it.
package membership
