package etcdcompat

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/cluster/membership"
)

// ClusterMember is what the Cluster service, MoveLeader and the
// leader-requiring interceptors need from the local member.
type ClusterMember interface {
	MemberAdd(ctx context.Context, peerURLs []string, isLearner bool) (*membershippb.Member, []*membershippb.Member, error)
	MemberRemove(ctx context.Context, id uint64) ([]*membershippb.Member, error)
	MemberUpdate(ctx context.Context, id uint64, peerURLs []string) ([]*membershippb.Member, error)
	MemberPromote(ctx context.Context, id uint64) ([]*membershippb.Member, error)
	MoveLeader(ctx context.Context, transferee uint64) error
	// Leader is the member's current view of the leader, 0 for none.
	Leader() uint64
	// IsLearner reports whether this member is a learner.
	IsLearner() bool
	// ElectionTimeout paces the no-leader watch of leader-requiring
	// streams.
	ElectionTimeout() time.Duration
}

// clusterErrors maps membership and leadership errors to etcd's statuses
// (v3rpc's toGRPCErrorMap). ErrNotEnoughStartedMembers maps to etcd's
// client-side EtcdError, which gRPC sends as codes.Unknown with the text,
// exactly as etcd's server does.
var clusterErrors = map[error]error{
	membership.ErrIDRemoved:              rpctypes.ErrGRPCMemberNotFound,
	membership.ErrIDNotFound:             rpctypes.ErrGRPCMemberNotFound,
	membership.ErrIDExists:               rpctypes.ErrGRPCMemberExist,
	membership.ErrPeerURLExists:          rpctypes.ErrGRPCPeerURLExist,
	membership.ErrMemberNotLearner:       rpctypes.ErrGRPCMemberNotLearner,
	membership.ErrTooManyLearners:        rpctypes.ErrGRPCTooManyLearners,
	membererr.ErrNotEnoughStartedMembers: rpctypes.ErrMemberNotEnoughStarted,
	membererr.ErrLearnerNotReady:         rpctypes.ErrGRPCLearnerNotReady,
	membererr.ErrUnhealthy:               rpctypes.ErrGRPCUnhealthy,
	membererr.ErrNotLeader:               rpctypes.ErrGRPCNotLeader,
	membererr.ErrBadLeaderTransferee:     rpctypes.ErrGRPCBadLeaderTransferee,
}

func toClusterGRPCError(err error) error {
	for known, mapped := range clusterErrors {
		if errors.Is(err, known) {
			return mapped
		}
	}
	return ToGRPCError(err)
}

// clusterService is etcd's Cluster service.
type clusterService struct {
	pb.UnimplementedClusterServer
	srv Member
}

func (c *clusterService) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if r.Linearizable {
		// etcd answers a linearizable member list after a ReadIndex round.
		if err := c.srv.LinearizableRead(ctx); err != nil {
			return nil, ToGRPCError(err)
		}
	}
	// Then, as etcd's requireAuthInfo: with authentication on, any
	// authenticated user may list the members, nobody anonymous.
	if am, ok := c.srv.(AuthMember); ok {
		if _, on := am.AuthRevision(); on {
			if err := am.AuthCheckUser(ctx); err != nil {
				return nil, ToGRPCError(err)
			}
		}
	}
	return &pb.MemberListResponse{Header: c.header(), Members: toProtoMembers(c.srv.Members())}, nil
}

// MemberAdd validates the peer URLs as etcd's types.NewURLs does before
// anything is proposed.
func (c *clusterService) MemberAdd(ctx context.Context, r *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	if !validPeerURLs(r.PeerURLs) {
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	m, members, err := c.srv.MemberAdd(ctx, r.PeerURLs, r.IsLearner)
	if err != nil {
		return nil, toClusterGRPCError(err)
	}
	added := toProtoMembers([]*membershippb.Member{m})[0]
	return &pb.MemberAddResponse{Header: c.header(), Member: added, Members: toProtoMembers(members)}, nil
}

func (c *clusterService) MemberRemove(ctx context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	members, err := c.srv.MemberRemove(ctx, r.ID)
	if err != nil {
		return nil, toClusterGRPCError(err)
	}
	return &pb.MemberRemoveResponse{Header: c.header(), Members: toProtoMembers(members)}, nil
}

func (c *clusterService) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	if !validPeerURLs(r.PeerURLs) {
		return nil, rpctypes.ErrGRPCMemberBadURLs
	}
	members, err := c.srv.MemberUpdate(ctx, r.ID, r.PeerURLs)
	if err != nil {
		return nil, toClusterGRPCError(err)
	}
	return &pb.MemberUpdateResponse{Header: c.header(), Members: toProtoMembers(members)}, nil
}

func (c *clusterService) MemberPromote(ctx context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	members, err := c.srv.MemberPromote(ctx, r.ID)
	if err != nil {
		return nil, toClusterGRPCError(err)
	}
	return &pb.MemberPromoteResponse{Header: c.header(), Members: toProtoMembers(members)}, nil
}

func validPeerURLs(urls []string) bool {
	if len(urls) == 0 {
		return false
	}
	for _, u := range urls {
		if membership.ValidateURL(u) != nil {
			return false
		}
	}
	return true
}

// header is etcd's cluster-service header: IDs and term, no revision.
func (c *clusterService) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: c.srv.ClusterID(), MemberId: c.srv.ID(), RaftTerm: c.srv.Term()}
}

func toProtoMembers(ms []*membershippb.Member) []*pb.Member {
	out := make([]*pb.Member, len(ms))
	for i, m := range ms {
		pm := &pb.Member{ID: m.ID}
		if m.RaftAttributes != nil {
			pm.PeerURLs = m.RaftAttributes.PeerUrls
			pm.IsLearner = m.RaftAttributes.IsLearner
		}
		if m.MemberAttributes != nil {
			pm.Name = m.MemberAttributes.Name
			pm.ClientURLs = m.MemberAttributes.ClientUrls
		}
		out[i] = pm
	}
	return out
}

// The interceptors below are etcd's (v3rpc/interceptor.go): a learner
// answers only Status and serializable Range (and no stream); a request
// carrying the "hasleader" metadata (clientv3.WithRequireLeader) fails at
// once with "etcdserver: no leader" when the member knows no leader, and
// such a stream is cancelled with that error after maxNoLeaderTimeouts
// election timeouts without one.

// maxNoLeaderTimeouts is etcd's maxNoLeaderCnt.
const maxNoLeaderTimeouts = 3

// leaderGuard holds the interceptors.
type leaderGuard struct {
	srv     ClusterMember
	metrics *clientMetrics // counts requests by client API version, as etcd's interceptors
	// next is the unary check after these (authGuard's), called
	// directly: each interceptor gRPC chains costs a closure per call.
	next grpc.UnaryServerInterceptor
}

func (g leaderGuard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if g.srv.IsLearner() && !supportedForLearner(req) {
		return nil, rpctypes.ErrGRPCNotSupportedForLearner
	}
	if err := g.countRequest(ctx, false); err != nil {
		return nil, err
	}
	if requiresLeader(ctx) && g.srv.Leader() == 0 {
		return nil, rpctypes.ErrGRPCNoLeader
	}
	if g.next != nil {
		return g.next(ctx, req, info, handler)
	}
	return handler(ctx, req)
}

func (g leaderGuard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if g.srv.IsLearner() && info.FullMethod != "/etcdserverpb.Maintenance/Snapshot" {
		return rpctypes.ErrGRPCNotSupportedForLearner
	}
	if err := g.countRequest(ss.Context(), true); err != nil {
		return err
	}
	if !requiresLeader(ss.Context()) {
		return handler(srv, ss)
	}
	if g.srv.Leader() == 0 {
		return rpctypes.ErrGRPCNoLeader
	}
	ctx := newCauseContext(ss.Context())
	defer ctx.cancel(nil)
	go g.watchLeader(ctx)
	return handler(srv, streamWithContext{ServerStream: ss, ctx: ctx})
}

// countRequest counts a request that carries gRPC metadata (every real
// one does), as etcd's interceptors do. It reads the one metadata key:
// the whole metadata, copied by FromIncomingContext, only for a request
// without it.
func (g leaderGuard) countRequest(ctx context.Context, stream bool) error {
	if g.metrics == nil {
		return nil
	}
	ver := metadata.ValueFromIncomingContext(ctx, rpctypes.MetadataClientAPIVersionKey)
	if ver == nil {
		if _, hasMD := metadata.FromIncomingContext(ctx); !hasMD {
			return nil
		}
	}
	return g.metrics.countRequest(ver, stream)
}

// watchLeader cancels ctx with ErrGRPCNoLeader once the member has had no
// leader for maxNoLeaderTimeouts consecutive election timeouts.
func (g leaderGuard) watchLeader(ctx *causeContext) {
	t := time.NewTicker(g.srv.ElectionTimeout())
	defer t.Stop()
	without := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if g.srv.Leader() != 0 {
			without = 0
			continue
		}
		if without++; without >= maxNoLeaderTimeouts {
			ctx.cancel(rpctypes.ErrGRPCNoLeader)
			return
		}
	}
}

// requiresLeader reports whether the request carries the "hasleader"
// metadata (clientv3.WithRequireLeader).
func requiresLeader(ctx context.Context) bool {
	vs := metadata.ValueFromIncomingContext(ctx, rpctypes.MetadataRequireLeaderKey)
	return len(vs) > 0 && vs[0] == rpctypes.MetadataHasLeader
}

func supportedForLearner(req any) bool {
	switch r := req.(type) {
	case *pb.StatusRequest:
		return true
	case *pb.RangeRequest:
		return r.Serializable
	}
	return false
}

// causeContext is a cancellable context whose Err reports why it was
// cancelled, so a stream handler that returns ctx.Err() sends the client
// "etcdserver: no leader" rather than "context canceled" (etcd's
// cancellableContext).
type causeContext struct {
	context.Context
	cancelFn context.CancelFunc
	mu       sync.Mutex
	reason   error
}

func newCauseContext(parent context.Context) *causeContext {
	ctx, cancel := context.WithCancel(parent)
	return &causeContext{Context: ctx, cancelFn: cancel}
}

func (c *causeContext) cancel(reason error) {
	c.mu.Lock()
	if c.reason == nil {
		c.reason = reason
	}
	c.mu.Unlock()
	c.cancelFn()
}

func (c *causeContext) Err() error {
	c.mu.Lock()
	reason := c.reason
	c.mu.Unlock()
	if reason != nil {
		return reason
	}
	return c.Context.Err()
}

type streamWithContext struct {
	grpc.ServerStream
	ctx context.Context
}

func (s streamWithContext) Context() context.Context { return s.ctx }
