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
// same batch as the entry that changed it. The same bucket holds the
// cluster version ("3.6.0") once a leader has recorded it with a
// ClusterVersionSet request, as etcd's leader does at its first commit,
// and the downgrade job (etcd's DowngradeInfoSet) while one is enabled.
//
// downgrade.go has etcd 3.6's downgrade rules: a target is the previous
// minor version of the cluster version (ValidateDowngrade), and the
// leader's version monitor moves the cluster version to an enabled
// job's target and back up to the members' version once the job is
// cancelled (NextClusterVersion).
//
// Changes are validated as etcd validates them (validate.go): an ID is
// never reused (removed IDs are remembered), a peer URL belongs to one
// member, only a learner can be promoted, and at most --max-learners
// learners exist. The server checks a change before proposing it, for
// etcd's error, and again when applying it, against replicated state only,
// so every member decides alike. The quorum guards of
// --strict-reconfig-check (ReadyToAddVoter, ReadyToRemoveVoter,
// ReadyToPromote) count started members: those that published their name.
// For example, with voters A and B started and C not, adding a fourth
// voter is refused (2 started of 4 is below a quorum of 3), while
// removing C is allowed (A and B are a quorum of the remaining two).
//
// Peers read the list from one another in etcd's format (peerapi.go): GET
// /members on the peer URL answers it as JSON with the cluster ID in the
// X-Etcd-Cluster-ID header, which a member joining with
// --initial-cluster-state=existing reads to learn its ID (FetchMembers).
// A new cluster's IDs come from the flags alone (bootstrap.go).
package membership
