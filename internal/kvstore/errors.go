package kvstore

import "errors"

// Sentinel errors. Their texts are the messages etcd 3.6 uses for the same
// condition, so that the gRPC layer can map each one to the matching
// rpctypes error (see doc.go for the table) and clients see etcd's wording.
var (
	// ErrCompacted: the requested revision is below the compacted revision.
	ErrCompacted = errors.New("mvcc: required revision has been compacted")
	// ErrFutureRev: the requested revision is above the current revision.
	ErrFutureRev = errors.New("mvcc: required revision is a future revision")
	// ErrLeaseNotFound: a Put names a lease the LeaseTable does not know.
	ErrLeaseNotFound = errors.New("lease not found")
	// ErrKeyNotFound: ignore_value or ignore_lease on a key that does not
	// exist, or an empty RequestOp in a txn.
	ErrKeyNotFound = errors.New("etcdserver: key not found")
	// ErrEmptyKey: a request without a key.
	ErrEmptyKey = errors.New("etcdserver: key is not provided")
	// ErrValueProvided: ignore_value together with a value.
	ErrValueProvided = errors.New("etcdserver: value is provided")
	// ErrLeaseProvided: ignore_lease together with a lease.
	ErrLeaseProvided = errors.New("etcdserver: lease is provided")
	// ErrTooManyOps: a txn with more compares or ops than allowed.
	ErrTooManyOps = errors.New("etcdserver: too many operations in txn request")
	// ErrDuplicateKey: a txn that writes one key twice, or puts and
	// deletes overlapping keys.
	ErrDuplicateKey = errors.New("etcdserver: duplicate key given in txn request")
	// ErrInvalidSortOption: a Range with an unknown sort order or target.
	ErrInvalidSortOption = errors.New("etcdserver: invalid sort option")
	// ErrNotReadOnly: ReadTxn was given a txn that can write (see
	// IsTxnReadOnly); such a txn must go through Raft and Store.Txn.
	ErrNotReadOnly = errors.New("kvstore: ReadTxn of a txn that writes")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("kvstore: store closed")
)
