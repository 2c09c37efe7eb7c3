// Package version keeps the cluster version and etcd 3.6's downgrade
// job, as etcd's leader keeps them (etcdserver/version and the
// Maintenance.Downgrade handler):
//
//   - a new cluster's first leader records the version (SetInitial, a
//     ClusterVersionSet entry), so the raft log holds the entries etcd's
//     does and reports the same indexes;
//   - every 4 s the leader decides the version again (Check,
//     membership.NextClusterVersion) and records a change: to a downgrade
//     job's target once the job is enabled, back to the members' version
//     once it is cancelled;
//   - Downgrade serves validate, enable and cancel with etcd 3.6's rules
//     (membership.ValidateDowngrade) and errors.
//
// Every change goes through raft and is applied as membership's; this
// package only decides what to propose, on the member it is given.
package version
