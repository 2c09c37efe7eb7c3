package forward

import (
	"context"
	"fmt"

	"github.com/metastore-io/metastore/internal/cluster/transport"
)

// Methods of the requests members forward to each other over the peer
// transport. Each handler answers only what its member can answer itself
// (a follower never forwards a forwarded request again), so a request
// cannot loop between members that disagree on who leads.
const (
	// MethodLeaseRenew is a single keep-alive, as members of earlier
	// builds forward them; this build forwards MethodLeaseRenewBatch.
	MethodLeaseRenew      = "lease.renew"
	MethodLeaseRenewBatch = "lease.renewbatch"
	MethodLeaseTimeToLive = "lease.timetolive"
	MethodMemberPromote   = "member.promote"
	MethodMemberStatus    = "member.status"
)

// Call sends one request to member to over t and decodes its reply. A
// reply carrying an error returns that error; a failure to deliver the
// request or to get the reply is wrapped so that IsFailure reports it.
func Call(ctx context.Context, t *transport.Transport, to uint64, method string, req Marshaler) ([]byte, error) {
	data, err := req.Marshal()
	if err != nil {
		return nil, fmt.Errorf("server: encode %s request: %w", method, err)
	}
	reply, err := t.Forward(ctx, to, method, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s to member %x: %w", errFailed, method, to, err)
	}
	return DecodeReply(reply)
}
