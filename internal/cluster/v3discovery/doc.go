// Package v3discovery bootstraps a new cluster through etcd's v3
// discovery protocol: the members find each other through an existing
// etcd (or MetaStore) cluster used as a registry, instead of an
// --initial-cluster list given to each of them.
//
// The registry holds, under a token chosen by the operator:
//
//	/_etcd/registry/<token>/_config/size          "3" (written by the operator)
//	/_etcd/registry/<token>/members/<member ID>    "name=peerURL[,name=peerURL]"
//
// Each new member (JoinCluster) reads the size, registers itself under
// its member ID (derived from its peer URLs and the token, as with
// --initial-cluster-token), waits until size members have registered and
// returns the first size registrations in the order they were created,
// joined with commas: the --initial-cluster every member then bootstraps
// with. A member whose own registration is not among the first size
// finds the cluster full (ErrFullCluster). For example, with size 3 and
// registrations m1, m2, m3, m4 in that order, m1-m3 bootstrap the
// cluster "m1=...,m2=...,m3=..." and m4 is refused.
//
// Errors reading the size (absent or not a positive number) end the
// join at once; errors talking to the registry are retried with a
// backoff doubling from 2 s to 256 s, until the context ends, as etcd
// retries. The package only talks to the registry: the caller owns
// turning the answer into a member.
package v3discovery
