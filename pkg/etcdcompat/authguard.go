package etcdcompat

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// authGuard makes the permission checks etcd makes in its API layer,
// before a request reaches the member (v3rpc's AuthAdmin, and the lease
// and membership checks of etcdserver): the operations reserved for the
// root role, and the ones that need some authenticated user. The checks
// of reads and writes of keys are the member's, made at read time and at
// apply.
type authGuard struct{ srv AuthMember }

// rootOnly lists the methods only a user with the root role may call.
var rootOnly = map[string]bool{
	"/etcdserverpb.KV/Compact":             true,
	"/etcdserverpb.Maintenance/Defragment": true,
	"/etcdserverpb.Maintenance/Snapshot":   true,
	"/etcdserverpb.Maintenance/Hash":       true,
	"/etcdserverpb.Maintenance/HashKV":     true,
	"/etcdserverpb.Maintenance/MoveLeader": true,
	"/etcdserverpb.Maintenance/Downgrade":  true,
	"/etcdserverpb.Cluster/MemberAdd":      true,
	"/etcdserverpb.Cluster/MemberRemove":   true,
	"/etcdserverpb.Cluster/MemberUpdate":   true,
	"/etcdserverpb.Cluster/MemberPromote":  true,
}

// anyUser lists the methods any authenticated user may call.
var anyUser = map[string]bool{
	"/etcdserverpb.Maintenance/Status": true,
	"/etcdserverpb.Lease/LeaseGrant":   true,
	"/etcdserverpb.Lease/LeaseRevoke":  true,
}

func (g authGuard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := g.before(ctx, req, info.FullMethod); err != nil {
		return nil, ToGRPCError(err)
	}
	switch r := req.(type) {
	case *pb.LeaseTimeToLiveRequest:
		return g.leaseTimeToLive(ctx, r, handler)
	case *pb.LeaseLeasesRequest:
		return g.leaseLeases(ctx, r, handler)
	}
	return handler(ctx, req)
}

func (g authGuard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if rootOnly[info.FullMethod] {
		if err := g.srv.AuthCheckAdmin(ss.Context()); err != nil {
			return ToGRPCError(err)
		}
	}
	return handler(srv, ss)
}

// before is the check of a unary call by its method. With authentication
// off every check below passes, so none is made: the two lookups of the
// method's name showed in a serializable range's profile
// (docs/performance.md, "Measurements behind the code").
func (g authGuard) before(ctx context.Context, req any, method string) error {
	if _, on := g.srv.AuthRevision(); !on {
		return nil
	}
	switch r := req.(type) {
	case *pb.MemberAddRequest:
		if !validPeerURLs(r.PeerURLs) {
			return nil // etcd refuses the URLs before it checks the user
		}
	case *pb.MemberUpdateRequest:
		if !validPeerURLs(r.PeerURLs) {
			return nil
		}
	case *pb.AlarmRequest:
		if r.Action == pb.AlarmRequest_GET {
			return g.srv.AuthCheckUser(ctx)
		}
		return g.srv.AuthCheckAdmin(ctx)
	}
	switch {
	case rootOnly[method]:
		return g.srv.AuthCheckAdmin(ctx)
	case anyUser[method]:
		return g.srv.AuthCheckUser(ctx)
	}
	return nil
}

// leaseTimeToLive: any user; with keys, the user must be able to read
// every key of the lease, and the auth revision must not move meanwhile.
func (g authGuard) leaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest, handler grpc.UnaryHandler) (any, error) {
	if err := g.srv.AuthCheckUser(ctx); err != nil {
		return nil, ToGRPCError(err)
	}
	if !r.Keys {
		return handler(ctx, r)
	}
	rev, err := g.srv.AuthCheckLeases(ctx, false, r.ID)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	resp, err := handler(ctx, r)
	if err != nil {
		return nil, err
	}
	if now, on := g.srv.AuthRevision(); on && now != rev {
		return nil, rpctypes.ErrGRPCAuthOldRevision
	}
	return resp, nil
}

// leaseLeases: the user must be able to read every key of every lease
// listed.
func (g authGuard) leaseLeases(ctx context.Context, r *pb.LeaseLeasesRequest, handler grpc.UnaryHandler) (any, error) {
	if err := g.srv.AuthCheckUser(ctx); err != nil {
		return nil, ToGRPCError(err)
	}
	resp, err := handler(ctx, r)
	if err != nil {
		return nil, err
	}
	list, ok := resp.(*pb.LeaseLeasesResponse)
	if !ok {
		return resp, nil
	}
	ids := make([]int64, len(list.Leases))
	for i, l := range list.Leases {
		ids[i] = l.ID
	}
	rev, err := g.srv.AuthCheckLeases(ctx, false, ids...)
	if err != nil {
		return nil, ToGRPCError(err)
	}
	if now, on := g.srv.AuthRevision(); on && now != rev {
		return nil, rpctypes.ErrGRPCAuthOldRevision
	}
	return resp, nil
}

// leaseRenew is the check of one keep-alive: the user must be able to
// write every key of the lease (etcd's checkLeaseRenew).
func (g authGuard) leaseRenew(ctx context.Context, id int64) error {
	rev, err := g.srv.AuthCheckLeases(ctx, true, id)
	if err != nil {
		return err
	}
	if now, on := g.srv.AuthRevision(); on && now != rev {
		return rpctypes.ErrGRPCAuthOldRevision
	}
	return nil
}

// watchRefusal is the cancel reason of a watch the caller may not create,
// "" when it may: read access to the watched range is checked once, at
// creation, as etcd does. etcd gives the text of its gRPC status.
func (g authGuard) watchRefusal(ctx context.Context, r *pb.WatchCreateRequest) string {
	err := g.srv.AuthCheckWatch(ctx, r)
	if err == nil {
		return ""
	}
	st, _ := status.FromError(ToGRPCError(err))
	switch st.Code() {
	case codes.Unauthenticated, codes.InvalidArgument:
		// invalid auth token, user name is empty, auth revision is old
		return st.Err().Error()
	}
	return rpctypes.ErrGRPCPermissionDenied.Error()
}
