// Package e2e is the end-to-end suite: it starts real server processes
// (see test/framework) and talks to them only through the public etcd v3
// gRPC API, clientv3 and the stock etcdctl.
//
// The same tests run against MetaStore (E2E_TARGET=metastore, the default)
// and against the reference etcd 3.6.16 (E2E_TARGET=etcd, `make
// test-e2e-etcd`). etcd passing a test is what makes the test right; every
// expectation - revisions, response fields, gRPC codes and error messages,
// etcdctl output - is etcd's observable behaviour.
//
// Each top-level test starts its own single-member cluster, so a fresh
// store begins at revision 1 and tests can assert exact revisions. Tests
// that inspect server behaviour below clientv3 use the raw gRPC stubs
// (etcdserverpb.KVClient on the client's connection): clientv3 rewrites
// known error messages into rpctypes.EtcdError with the canonical code,
// which would hide a server returning the right text with the wrong code.
//
// The only target-specific expectation is how a clean SIGTERM shutdown
// looks (framework.Target.IsCleanStop): MetaStore exits 0, etcd re-raises
// the signal.
package e2e
