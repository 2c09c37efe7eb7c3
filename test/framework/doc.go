// Package framework runs real server processes for the end-to-end tests.
//
// The suite in test/e2e is written once and run against two binaries: the
// MetaStore server (bin/metastore) and the reference etcd 3.6 server
// (bin/ref/etcd, built from tools/). E2E_TARGET=metastore|etcd selects the
// binary under test (default metastore). Running the same assertions against
// etcd is how the tests themselves are validated: a test that etcd fails is
// a wrong test, not a MetaStore bug.
//
// The pieces, from the bottom up:
//
//   - Target names a server binary, knows where it lives under the repository
//     root and how it reports a clean shutdown.
//   - serverProcess is one run of a binary: it is started once, its exit is
//     observed by a single goroutine, and it can be signalled and waited for
//     with a deadline.
//   - Member is one cluster member: a name, a data directory and a pair of
//     loopback URLs that stay fixed across restarts, plus the process that is
//     currently running (if any). Stop (SIGTERM), Kill (SIGKILL) and Restart
//     act on the same data directory, which is how durability is tested.
//   - Cluster is a set of members bootstrapped together with one
//     --initial-cluster string: one member for most of the suite, 3 or 5
//     for the cluster tests (test/e2e/cluster_*_test.go) and the
//     linearizability check (test/linearizability).
//   - Etcdctl runs the stock etcdctl binary against a cluster and returns its
//     stdout, stderr and exit code.
//   - PeerNetwork (ClusterConfig.PeerProxies) is a test-owned TCP proxy in
//     front of each member's peer port: the member listens on a private
//     port and advertises the proxy. Isolate/Stall/Heal cut a member off
//     from the others, in both directions, by the source and destination
//     of each connection (the source found from the kernel's socket
//     tables, see proxy.go).
//   - Ports come from ReservePorts (ports.go): below the kernel's ephemeral
//     range, each held with a lock on its byte in a lock file shared by
//     every test process until the cluster (or test) ends, so a killed
//     member's port is never taken by a concurrently running test's server
//     while this test's clients still reconnect to it.
//   - Cluster.NewJoiningMember prepares a member that joins a running
//     cluster with --initial-cluster-state=existing after `member add`;
//     Member.Pause/Resume freeze a process with SIGSTOP/SIGCONT.
//
// Both servers take etcd's flag names, so a member's command line is the same
// for either target. For a member named "m0" with client port 40001 and peer
// port 40002 in a one-member cluster it reads:
//
//	--name=m0 --data-dir=<tmp>/m0.data
//	--listen-client-urls=http://127.0.0.1:40001 --advertise-client-urls=http://127.0.0.1:40001
//	--listen-peer-urls=http://127.0.0.1:40002 --initial-advertise-peer-urls=http://127.0.0.1:40002
//	--initial-cluster=m0=http://127.0.0.1:40002 --initial-cluster-state=new
//	--initial-cluster-token=metastore-e2e
//
// followed by ClusterConfig.ExtraFlags and the words of E2E_EXTRA_FLAGS (for
// example E2E_EXTRA_FLAGS=--storage-engine=rocksdb to run the whole suite on
// MetaStore's RocksDB engine).
//
// Readiness is an event, not a delay: WaitReady polls the member until a
// Status RPC reports a leader and a linearizable Get succeeds, and fails fast
// if the process exits meanwhile. Every process writes stdout and stderr to a
// per-member log file in the test's temporary directory; when a test fails,
// the cluster's cleanup prints the tail of every member's log. Children are
// started with Pdeathsig=SIGKILL so a crashed or timed-out test binary never
// leaves servers behind, and cleanup kills whatever is still running.
package framework
