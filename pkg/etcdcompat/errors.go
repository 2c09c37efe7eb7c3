package etcdcompat

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// grpcErrors maps MetaStore's errors to the gRPC statuses etcd returns for
// the same condition (etcd's v3rpc toGRPCErrorMap).
var grpcErrors = map[error]error{
	kvstore.ErrCompacted:         rpctypes.ErrGRPCCompacted,
	kvstore.ErrFutureRev:         rpctypes.ErrGRPCFutureRev,
	kvstore.ErrLeaseNotFound:     rpctypes.ErrGRPCLeaseNotFound,
	kvstore.ErrKeyNotFound:       rpctypes.ErrGRPCKeyNotFound,
	kvstore.ErrDuplicateKey:      rpctypes.ErrGRPCDuplicateKey,
	kvstore.ErrTooManyOps:        rpctypes.ErrGRPCTooManyOps,
	kvstore.ErrEmptyKey:          rpctypes.ErrGRPCEmptyKey,
	kvstore.ErrValueProvided:     rpctypes.ErrGRPCValueProvided,
	kvstore.ErrLeaseProvided:     rpctypes.ErrGRPCLeaseProvided,
	kvstore.ErrInvalidSortOption: rpctypes.ErrGRPCInvalidSortOption,
	kvstore.ErrStreamSortOrder:   status.Error(codes.Unimplemented, kvstore.ErrStreamSortOrder.Error()),
	membererr.ErrStopped:         rpctypes.ErrGRPCStopped,
	membererr.ErrTimeout:         rpctypes.ErrGRPCTimeout,
	membererr.ErrNoLeader:        rpctypes.ErrGRPCNoLeader,
	membererr.ErrRequestTooLarge: rpctypes.ErrGRPCRequestTooLarge,
	membererr.ErrTooManyRequests: rpctypes.ErrGRPCRequestTooManyRequests,
	membererr.ErrLeaderChanged:   rpctypes.ErrGRPCLeaderChanged,
	membererr.ErrNoSpace:         rpctypes.ErrGRPCNoSpace,
	membererr.ErrCorrupt:         rpctypes.ErrGRPCCorrupt,

	membership.ErrWrongDowngradeVersionFormat:   rpctypes.ErrGRPCWrongDowngradeVersionFormat,
	membership.ErrClusterVersionUnavailable:     rpctypes.ErrGRPCClusterVersionUnavailable,
	membership.ErrInvalidDowngradeTargetVersion: rpctypes.ErrGRPCInvalidDowngradeTargetVersion,
	membership.ErrDowngradeInProcess:            rpctypes.ErrGRPCDowngradeInProcess,
	membership.ErrNoInflightDowngrade:           rpctypes.ErrGRPCNoInflightDowngrade,

	auth.ErrRootUserNotExist:     rpctypes.ErrGRPCRootUserNotExist,
	auth.ErrRootRoleNotExist:     rpctypes.ErrGRPCRootRoleNotExist,
	auth.ErrUserAlreadyExist:     rpctypes.ErrGRPCUserAlreadyExist,
	auth.ErrUserEmpty:            rpctypes.ErrGRPCUserEmpty,
	auth.ErrUserNotFound:         rpctypes.ErrGRPCUserNotFound,
	auth.ErrRoleAlreadyExist:     rpctypes.ErrGRPCRoleAlreadyExist,
	auth.ErrRoleNotFound:         rpctypes.ErrGRPCRoleNotFound,
	auth.ErrRoleEmpty:            rpctypes.ErrGRPCRoleEmpty,
	auth.ErrAuthFailed:           rpctypes.ErrGRPCAuthFailed,
	auth.ErrPermissionNotGiven:   rpctypes.ErrGRPCPermissionNotGiven,
	auth.ErrPermissionDenied:     rpctypes.ErrGRPCPermissionDenied,
	auth.ErrRoleNotGranted:       rpctypes.ErrGRPCRoleNotGranted,
	auth.ErrPermissionNotGranted: rpctypes.ErrGRPCPermissionNotGranted,
	auth.ErrAuthNotEnabled:       rpctypes.ErrGRPCAuthNotEnabled,
	auth.ErrInvalidAuthToken:     rpctypes.ErrGRPCInvalidAuthToken,
	auth.ErrInvalidAuthMgmt:      rpctypes.ErrGRPCInvalidAuthMgmt,
	auth.ErrAuthOldRevision:      rpctypes.ErrGRPCAuthOldRevision,
}

// ToGRPCError converts an error from the store or the server into the
// status etcd would return: the mapping every service here answers with,
// exported so that the differential tests against etcd (test/etcddiff)
// check this table and not a copy of it. Context errors are left to
// gRPC, which turns them into Canceled / DeadlineExceeded as etcd's
// server does.
func ToGRPCError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if _, ok := status.FromError(err); ok {
		return err // already a status (request validation)
	}
	var tooLarge *kvstore.ResponseTooLargeError
	if errors.As(err, &tooLarge) {
		return responseTooLargeStatus(tooLarge)
	}
	if mapped, ok := grpcErrors[err]; ok {
		return mapped
	}
	for known, mapped := range grpcErrors {
		if errors.Is(err, known) {
			return mapped
		}
	}
	return status.Error(codes.Unknown, err.Error())
}

// responseTooLargeStatus is the answer to a read the store refused for
// its response's size, ResourceExhausted either way. Over the send limit
// it is gRPC's own refusal, which etcd's clients get once etcd has built
// the response: "trying to send message larger than max (N vs. M)", N
// counting the key-values exactly and the rest of the response at its
// largest (kvstore.ResponseOverheadBytes; etcd's N is exact to the byte).
// Over the memory bound, which etcd does not have, the text says so.
func responseTooLargeStatus(e *kvstore.ResponseTooLargeError) error {
	if e.Memory {
		return status.Errorf(codes.ResourceExhausted,
			"range response over this member's memory bound of %d bytes (a quarter of its GOMEMLIMIT; %d bytes of key-values read when it stopped): read the range in pages with a limit",
			e.Limit, e.KVBytes)
	}
	return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)",
		e.KVBytes+kvstore.ResponseOverheadBytes, e.Limit+kvstore.ResponseOverheadBytes)
}
