// Package sdk is the end-to-end suite of MetaStore's coordination SDK:
// pkg/concurrency (etcd's concurrency package, drop-in), pkg/lock (locks
// with fencing tokens), pkg/discovery (service registry and gRPC resolver),
// pkg/config (typed configuration) and the server-side v3lock and
// v3election gRPC services.
//
// Every behavioural test runs twice in one `go test` run: against a
// MetaStore member and against the reference etcd 3.6 member, both started
// through test/framework. A test that fails on etcd is a wrong test; one
// that fails only on MetaStore is a MetaStore bug. SDK_TARGETS (default
// "metastore etcd") narrows the run to one target while debugging; the
// suite ignores E2E_TARGET, because running both is its point.
//
// Each top-level test starts one single-member cluster per target and runs
// its scenarios as parallel subtests on it, each under its own key prefix
// (the subtest's name), so they cannot see each other's keys. Scenarios
// that restart the server get a cluster of their own. Waiting is always on
// an event (a watch, a channel, a process exit) bounded by the test's
// deadline, never on a sleep; the lease-expiry scenarios use 2-second TTLs
// so the whole suite stays within a few minutes on two cores.
package sdk
