// Package linearizability checks that a 3-member cluster behaves as one
// linearizable key-value store while a nemesis injures it.
//
// Clients, each bound to one member over a plain gRPC connection (one
// attempt per operation: clientv3 would retry a write the server gave up
// on, and a write applied twice is not one operation), run random
// operations on a handful of keys:
//
//	get k           linearizable Range       -> value, or "" if absent
//	put k v         Put                      -> ok
//	cas k old new   Txn: if value(k) == old  -> put k new; succeeded?
//	                (old "" compares create_revision == 0)
//
// Every value written is unique, so a read names the write it saw. Each
// operation is recorded with its invocation and response times; one that
// fails or times out may or may not have taken effect, so it is recorded
// with an unknown outcome and a response time after everything else:
// porcupine may then linearize it anywhere after its invocation,
// including after every other operation (never happened). Failed reads
// change nothing and are dropped.
//
// Meanwhile the nemesis cycles through its faults, one member at a time:
// kill -9 (and restart a little later on the same data dir), SIGSTOP
// (SIGCONT later), and isolation behind the peer proxies
// (framework.PeerNetwork; healed later), and membership changes
// (membership.go): add a fourth member as a learner, promote it, remove a
// random voter (the leader too), re-add that slot on a wiped data dir, so
// the cluster moves between 3 and 4 voters and never loses its quorum to
// the one injured member. The disk faults (nemesis_disk.go) damage what a
// member keeps on disk: tornwal kills it and leaves a torn, never
// acknowledged record after the last complete one in its newest WAL
// segment, in the target's own format (waltail.go: a partial header, a
// partial payload, zeros, a record torn at a sector boundary, garbage);
// the restarted member must log that it dropped the tail and serve again.
// truncsnap kills it and cuts its newest member/snap/*.snap short: it
// recovers (etcd falls back to an older snapshot) or refuses to start
// naming the file (MetaStore), and is then replaced as an operator would:
// data dir wiped, member remove, member add, started with
// --initial-cluster-state=existing (membership.replace). lostdata kills it,
// deletes its data dir and replaces it; it catches up by snapshot.
// diskfull (root only: each data dir is a tmpfs of its own from the start,
// diskfull.go; skipped with a log line otherwise) fills the rest of one
// member's tmpfs for the hold time: the member keeps serving reads or
// stops with "no space left on device" in its log, and is restarted once
// the space is back. Both preallocate their WAL segments, so log writes
// go on: etcd stops at its next bbolt commit or snapshot file, MetaStore
// at its next write that needs space (a snapshot file, RocksDB's tables;
// it fails the member rather than retry a write or fsync), so on the
// memory engine it often serves through a whole hold. A member that does otherwise fails the test. The seam
// faults (nemesis_disk_seam.go) act inside a member's disk through
// MetaStore's disk-fault seam (internal/faults/diskfault), so the cluster then
// runs bin/metastore-faults (make build-faults) with a plan file per
// member, switched at runtime: slowdisk delays every fsync of one member
// (half the time the leader) by 50-500 ms, one time in four by 1.5-3 s,
// over the election timeout, for the hold time; a leader so stalled sends
// no heartbeats while its raft loop waits in the fsync, as etcd's does,
// and the others elect a new one; the member must keep running. diskerror
// makes one member's fsyncs or writes fail with EIO: it must stop on its
// own within 30 s, its log naming the injected failure and the file, and
// is restarted on a healed disk after the hold. Against etcd, which has
// no such seam, they are left out with a log line. -lin.faults picks the
// faults (default all: every fault but slowdisk and diskerror, so that
// those runs check the shipped binary). At
// the end every member is healed and running again, a pending learner is
// promoted, and a final read of every key through every member of the
// cluster joins the history.
//
// Beside the clients, watchers follow the keys from revision 1, hopping
// from member to member (each stream lasts a random 0.5-4 s, or until its
// member dies) and asking for progress notifications every 300 ms; a
// watcher resumes after the last event or progress notification it got.
// At the end every member's full event history is read and compared, and
// each watcher's record is held against it in etcd's robustness terms:
// ordered, unique, atomic, bookmarkable, reliable and resumable (watch.go).
//
// Every client and watcher knows the cluster's ID (read from a response
// header at the start) and holds every response header against it: a
// member's port, free while the member is killed, could be taken by
// another test's server (test/framework leases ports against that, see
// framework.ReservePorts, but a process outside the framework could still
// bind one). An answer carrying another cluster ID did not come from this
// cluster: the operation failed with nothing done here and stays out of
// the history, and a watch stream is abandoned without recording it.
//
// The history is checked with github.com/anishathalye/porcupine against
// a register per key (the model is partitioned by key). First the full
// event history settles every unknown outcome (check.go): a write whose
// unique value is in no event is dropped (as if linearized after
// everything), one that is there becomes known and returns no later than
// the first operation whose header revision covers its event. Open-ended
// operations are what made porcupine undecided on long runs (~380k
// operations in 8 minutes); settled, a 10-minute history checks in
// seconds. A violation
// writes porcupine's HTML visualisation next to the test's log and fails.
//
// `make test` runs 60 s (the default of -lin.duration) on the memory
// engine and 30 s on RocksDB, under all eight faults of "all" (a disk
// fault costs about what a kill does, a replacement some seconds of
// catching up), and TestLinearizabilityDiskSeam runs slowdisk and
// diskerror for 20 s on each engine;
// `make test-linearizability-long` runs 10 minutes, and `make
// test-faults-long FAULT=... ENGINE=... DURATION=...` one fault at a
// time; each run ends with a summary line (operations, faults injected
// and what the disk faults found, verdict). Like the e2e suite it runs
// against E2E_TARGET (metastore or etcd): etcd passing validates the test.
package linearizability
