package forward

import (
	"errors"
	"fmt"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/lease"
)

// Requests forwarded between members travel as protobuf bytes over the
// peer transport's request/response path. The reply carries its own
// outcome, so that an error the serving member decided on (a lease that
// does not exist, a learner that lags) reaches the caller as the same
// sentinel error, while transport failures stay transport errors:
//
//	reply = status u8 | body
//	status 0: body is the protobuf response
//	status 1: body is the error text (one of forwardedErrors, or any other)
//
// For example a keep-alive for an unknown lease comes back as
// 0x01 "lease not found" and is decoded to lease.ErrLeaseNotFound.
const (
	replyOK    byte = 0
	replyError byte = 1
)

// forwardedErrors are the errors a forwarded request can end with that the
// caller acts on; their texts are unique (they are etcd's).
var forwardedErrors = []error{
	lease.ErrLeaseNotFound,
	lease.ErrNotPrimary,
	membererr.ErrLearnerNotReady,
	membererr.ErrNotLeader,
	membererr.ErrNotEnoughStartedMembers,
	membererr.ErrStopped,
	membererr.ErrTimeout,
	membererr.ErrNoLeader,
	membership.ErrIDNotFound,
	membership.ErrIDRemoved,
	membership.ErrMemberNotLearner,
}

var (
	// ErrMalformedReply is returned for a reply that does not decode.
	ErrMalformedReply = errors.New("server: malformed forwarded reply")
	// errFailed wraps a failure to deliver a forwarded request or to
	// receive its reply: the other member may never have seen it.
	errFailed = errors.New("server: forwarding failed")
)

// IsFailure reports whether err is a failure to deliver a forwarded
// request or to receive its reply, rather than the other member's answer.
func IsFailure(err error) bool { return errors.Is(err, errFailed) }

// Retryable turns a delivery failure into lease.ErrNotPrimary: no
// primary lessor answered, so the caller retries with whoever leads next,
// exactly as when the leader itself answers that it is not primary yet.
// An answer from the other member is kept as it is.
func Retryable(err error) error {
	if IsFailure(err) {
		return fmt.Errorf("%w: %w", lease.ErrNotPrimary, err)
	}
	return err
}

// EncodeReply builds the reply to a forwarded request.
func EncodeReply(body []byte, err error) []byte {
	if err != nil {
		return append([]byte{replyError}, err.Error()...)
	}
	return append([]byte{replyOK}, body...)
}

// Marshaler is a generated protobuf message.
type Marshaler interface{ Marshal() ([]byte, error) }

// EncodeMessageReply marshals msg into an OK reply, or encodes err.
func EncodeMessageReply(msg Marshaler, err error) []byte {
	if err != nil {
		return EncodeReply(nil, err)
	}
	body, merr := msg.Marshal()
	if merr != nil {
		return EncodeReply(nil, fmt.Errorf("server: encode forwarded reply: %w", merr))
	}
	return EncodeReply(body, nil)
}

// DecodeReply splits a reply into the protobuf body or the error it
// carries, mapped back to a sentinel error where one has that text.
func DecodeReply(reply []byte) ([]byte, error) {
	if len(reply) == 0 {
		return nil, ErrMalformedReply
	}
	switch reply[0] {
	case replyOK:
		return reply[1:], nil
	case replyError:
		text := string(reply[1:])
		for _, known := range forwardedErrors {
			if known.Error() == text {
				return nil, known
			}
		}
		return nil, errors.New(text)
	}
	return nil, fmt.Errorf("%w: status %d", ErrMalformedReply, reply[0])
}
