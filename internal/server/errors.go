package server

import "errors"

// Errors of the server layer. Their texts are etcd's, and pkg/etcdcompat
// maps each to the gRPC status etcd returns for it.
var (
	ErrStopped          = errors.New("etcdserver: server stopped")
	ErrTimeout          = errors.New("etcdserver: request timed out")
	ErrNoLeader         = errors.New("etcdserver: no leader")
	ErrRequestTooLarge  = errors.New("etcdserver: request is too large")
	ErrTooManyRequests  = errors.New("etcdserver: too many requests")
	ErrLeaderChanged    = errors.New("etcdserver: leader changed")
	ErrUnknownMethod    = errors.New("etcdserver: unknown method")
	ErrNotImplementedOp = errors.New("etcdserver: request type not supported by this member")
)
