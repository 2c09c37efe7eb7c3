package lease

import "errors"

// MaxTTL is the largest TTL a lease may be granted, in seconds (etcd's
// MaxLeaseTTL, about 285 years).
const MaxTTL = 9_000_000_000

// Errors. Their texts are etcd's lessor errors; pkg/etcdcompat maps the
// first three to etcd's gRPC statuses ("etcdserver: requested lease not
// found", "etcdserver: lease already exists", "etcdserver: too large lease
// TTL").
var (
	// ErrLeaseNotFound: no lease with that ID (never granted, revoked, or 0).
	ErrLeaseNotFound = errors.New("lease not found")
	// ErrLeaseExists: a grant names an ID that is already in use.
	ErrLeaseExists = errors.New("lease already exists")
	// ErrLeaseTTLTooLarge: a grant asks for more than MaxTTL seconds.
	ErrLeaseTTLTooLarge = errors.New("too large lease TTL")
	// ErrNotPrimary: the request needs the leader's clock and this lessor
	// is not (or no longer) primary; the caller forwards or retries.
	ErrNotPrimary = errors.New("not a primary lessor")
	// ErrStopped: the lessor was stopped.
	ErrStopped = errors.New("lease: lessor stopped")
)
