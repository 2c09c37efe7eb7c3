// Package corruption runs etcd's corruption checks (etcdserver/corrupt.go)
// over HashKV: members
// that applied the same log must have the same hash of the key history at
// every revision, whatever their storage engine.
//
//   - initial check (--experimental-initial-corrupt-check, gate
//     InitialCorruptCheck): a restarting member, before it serves clients,
//     compares its hash at its current revision with every peer's at that
//     revision; a different hash at the same compacted revision stops it.
//   - periodic check (--corrupt-check-time): the leader hashes, asks every
//     peer for its hash at that revision, hashes again after a linearizable
//     read; it raises a CORRUPT alarm for itself if its own hash changed
//     under it, or for a follower that is ahead of it, compacted further,
//     or has another hash at the same compacted revision.
//   - compact hash check (--experimental-compact-hash-check-enabled, gate
//     CompactHashCheck; every --compact-hash-check-time): the leader
//     compares the hashes at the latest compacted revision; members in the
//     minority (all: member 0, when no majority agrees) get a CORRUPT alarm.
//
// Peers answer on their peer URLs at /members/hashkv, etcd's endpoint and
// wire format (a JSON HashKVRequest in a GET body, a JSON HashKVResponse).
// A CORRUPT alarm makes every member refuse writes (alarmGate) until it
// is disarmed.
//
// The member runtime (internal/server) runs the checks on its leader's
// schedule and raises the alarms through raft (Member.RaiseCorrupt); this
// package decides what to compare and what a difference means.
package corruption
