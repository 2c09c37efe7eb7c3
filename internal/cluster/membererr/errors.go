// Package membererr holds the errors a member (internal/server) returns to
// its clients, with etcd's texts. It is a leaf so that both the member,
// which returns them, and pkg/etcdcompat, which maps each to the gRPC
// status etcd returns for it, can name them without depending on each
// other.
package membererr

import "errors"

var (
	ErrStopped          = errors.New("etcdserver: server stopped")
	ErrTimeout          = errors.New("etcdserver: request timed out")
	ErrNoLeader         = errors.New("etcdserver: no leader")
	ErrRequestTooLarge  = errors.New("etcdserver: request is too large")
	ErrTooManyRequests  = errors.New("etcdserver: too many requests")
	ErrLeaderChanged    = errors.New("etcdserver: leader changed")
	ErrUnknownMethod    = errors.New("etcdserver: unknown method")
	ErrNotImplementedOp = errors.New("etcdserver: request type not supported by this member")

	// The alarm gates (etcd maps them to "etcdserver: mvcc: database
	// space exceeded", ResourceExhausted, and "etcdserver: corrupt
	// cluster", DataLoss).
	ErrNoSpace = errors.New("etcdserver: no space")
	ErrCorrupt = errors.New("etcdserver: corrupt cluster")

	// Membership and leadership.
	ErrNotEnoughStartedMembers = errors.New("etcdserver: re-configuration failed due to not enough started members")
	ErrLearnerNotReady         = errors.New("etcdserver: can only promote a learner member which is in sync with leader")
	ErrUnhealthy               = errors.New("etcdserver: unhealthy cluster")
	ErrNotLeader               = errors.New("etcdserver: not leader")
	ErrBadLeaderTransferee     = errors.New("etcdserver: bad leader transferee")
)
