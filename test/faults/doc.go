// Package faults runs real members through the faults that the
// linearizability suite (test/linearizability: kill, pause, partition)
// does not inflict: a full disk, a damaged data directory, a member that
// loses all its data and rejoins. Each test checks the one promise that
// must survive every fault: no acknowledged write is lost, and the
// member either keeps serving or stops with a message that names the
// cause.
//
// TestRequestFuzzer sends random well-formed and malformed KV, Lease,
// Cluster and Maintenance requests to a live member (10 s in make test,
// FUZZTIME in make fuzz, -reqfuzz.duration by hand).
//
// The overload tests (TestOverload*) flood one member: watchers on a
// connection that never reads, 64 clients putting values just under
// --max-request-bytes, thousands of connections opened at once. The
// member must stay up, stay under 2 GiB resident, keep answering a
// well-behaved client and refuse oversize requests with etcd's error;
// each logs its peak RSS, error counts and the well-behaved client's
// latency. -overload.scale=long (make test-overload-long) runs them at
// 100,000 watchers and 5,000 connections. TestOverloadHugeRange reads a
// range over the member's send limit (lowered to 32 MiB at the short
// scale, etcd's 2 GiB at the long one, where etcd refuses it too) and
// TestOverloadRangeMemoryBound one over a quarter of GOMEMLIMIT: refused
// with ResourceExhausted, while keys-only, count-only and paged reads of
// the same keys are answered.
//
// Faults inside the disk come from bin/metastore-faults, MetaStore built
// with the internal/faults/diskfault seam (make build-faults); those tests run
// against MetaStore only (etcd's counterpart, gofail failpoints, is not
// built here). A cluster started with framework.ClusterConfig.DiskFaults
// reads each member's plan from a file, and Member.SetDiskFault switches
// it at runtime and waits for the member's acknowledgement:
// TestSlowDiskLeader runs against etcd too: there strace delays the
// leader's fdatasync and fsync system calls (stall_test.go; root only),
// and TestDiskErrorStopsTheMember's fsync case fails them with EIO.
// TestDiskErrorStopsTheMember switches failing fsyncs and writes on the
// WAL, the snapshot files and the RocksDB engine under a put load (the
// member must stop naming the file and the error, and restarted hold
// every acknowledged put); TestSlowDiskLeader stalls the leader's fsyncs
// for two election timeouts (leadership must move to a healthy member,
// which goes on acknowledging writes at its pace, and after healing all
// three converge); TestSlowFsyncOnOneMember slows a follower.
//
// Like the e2e suite the tests run against E2E_TARGET (metastore or etcd)
// with E2E_EXTRA_FLAGS appended, so every expectation is checked against
// a real etcd 3.6 too. Tests that need root (to mount a small tmpfs) skip
// without it.
package faults
