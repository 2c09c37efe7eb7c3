// Package cluster groups what makes members one cluster; it holds no
// code of its own.
//
//	membership  the member list and cluster ID, as Raft's conf changes apply them,
//	            and etcd's /members
//	membererr   the errors of membership changes, shared by apply and the API
//	transport   the peer network: Raft messages, snapshots, forwarded requests
//	forward     what one member asks another: the reply codec, keep-alive batches
//	corruption  etcd's corruption checks over the members' HashKV
//	version     the cluster version and etcd's downgrade job
//	v3discovery etcd's v3 discovery protocol (--discovery-endpoints)
//	tcpproxy    the layer-4 client gateway (`metastore gateway start`)
package cluster
