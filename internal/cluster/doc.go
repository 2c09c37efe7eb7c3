// Package cluster groups what makes members one cluster; it holds no
// code of its own.
//
//	membership  the member list and cluster ID, as Raft's conf changes apply them
//	membererr   the errors of membership changes, shared by apply and the API
//	transport   the peer network: Raft messages, snapshots, forwarded requests
//	v3discovery etcd's v3 discovery protocol (--discovery-endpoints)
//	tcpproxy    the layer-4 client gateway (`metastore gateway start`)
package cluster
