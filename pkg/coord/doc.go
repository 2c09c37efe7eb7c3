// Package coord is the coord module of the coord-module design
// (docs/coordination.md in the repository) on MetaStore: one Provider
// giving a distributed lock (Lock()), a service registry with gRPC connections
// (Registry()) and a configuration centre (Config()), built over
// MetaStore's own packages, with no second implementation of any of them:
//
//	coord.New(ctx, cfg, coord.WithLogger(l))  one clientv3 client, retries with exponential backoff
//	Provider.Lock()      lock.DistributedLock   on pkg/concurrency/lock (fenced, FIFO, lease per lock)
//	Provider.Registry()  registry.ServiceRegistry on pkg/discovery (leases, watch, gRPC resolver)
//	Provider.Config()    config.ConfigCenter     on pkg/config (versions, CAS, gap-free watch, prefix batches)
//
// Code written against the design compiles unchanged (a test holds it):
// the interfaces live in the subpackages lock, registry and config with
// the design's names and signatures, and this package re-exports the
// errors (ErrLockExpired, ErrLockNotHeld, ErrLockConflict) and
// ValidationError.
//
// # Keys
//
// Under CoordinatorConfig.Namespace ("coord/" by default): locks in
// "<ns>locks/<key>/<lease>", services in "<ns>services/<name>/<host:port>"
// (etcd's naming records, so etcd's resolver reads them too), configuration
// in "<ns>config/<key>" as JSON.
//
// # Retries, metrics and logs
//
// Calls that are one round trip (registry and config operations, and the
// connectivity check in New) are retried on transient errors (no leader,
// timeouts, unavailable) per RetryConfig: MaxAttempts attempts, pauses
// from InitialDelay growing by Multiplier up to MaxDelay. Lock acquisition
// retries inside pkg/concurrency/lock until its context ends. Lock metrics
// (coord_lock_wait_seconds, coord_lock_hold_seconds,
// coord_lock_acquires_total{result}, coord_lock_renews_total{result}) are
// registered with WithRegisterer; acquisitions and releases are logged
// through WithLogger's logger with component=coord.
package coord
