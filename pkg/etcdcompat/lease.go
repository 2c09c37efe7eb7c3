package etcdcompat

import (
	"context"
	"errors"
	"io"
	"log/slog"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/metastore-io/metastore/internal/lease"
)

// LeaseMember is what the Lease service needs from the local member.
// Grant and revoke go through Raft; renew and time-to-live are answered
// by the leader's lease clock (a follower forwards them); the lease list
// is local.
type LeaseMember interface {
	LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error)
	LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error)
	// LeaseRenew restarts lease id's TTL (one keep-alive) and returns it;
	// rpctypes.ErrGRPCLeaseNotFound (or MetaStore's lease error) for an
	// unknown or expired lease.
	LeaseRenew(ctx context.Context, id int64) (int64, error)
	LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error)
	LeaseLeases(ctx context.Context, r *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error)
}

// leaseService is etcd's Lease service.
type leaseService struct {
	pb.UnimplementedLeaseServer
	srv LeaseMember
	hdr headerFiller
	log *slog.Logger
	// recvFailures and sendFailures count keep-alive streams that broke
	// other than by the client going away (nil: not counted).
	recvFailures, sendFailures *lazyCounter
	// checkRenew, when set, checks that the caller may keep a lease
	// alive (authGuard.leaseRenew); nil checks nothing.
	checkRenew func(ctx context.Context, id int64) error
}

func newLeaseService(srv LeaseMember, hdr headerFiller, log *slog.Logger) *leaseService {
	return &leaseService{srv: srv, hdr: hdr, log: log}
}

// toLeaseGRPCError maps the lessor's errors to etcd's statuses, and
// everything else through the common table.
func toLeaseGRPCError(err error) error {
	switch {
	case errors.Is(err, lease.ErrLeaseNotFound):
		return rpctypes.ErrGRPCLeaseNotFound
	case errors.Is(err, lease.ErrLeaseExists):
		return rpctypes.ErrGRPCLeaseExist
	case errors.Is(err, lease.ErrLeaseTTLTooLarge):
		return rpctypes.ErrGRPCLeaseTTLTooLarge
	}
	return ToGRPCError(err)
}

// isLeaseNotFound tells an unknown or expired lease, as MetaStore's
// lessor or another member reports it.
func isLeaseNotFound(err error) bool {
	return errors.Is(err, lease.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound)
}

func (ls *leaseService) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	resp, err := ls.srv.LeaseGrant(ctx, r)
	if err != nil {
		return nil, toLeaseGRPCError(err)
	}
	ls.hdr.fill(resp.Header)
	return resp, nil
}

func (ls *leaseService) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	resp, err := ls.srv.LeaseRevoke(ctx, r)
	if err != nil {
		return nil, toLeaseGRPCError(err)
	}
	ls.hdr.fill(resp.Header)
	return resp, nil
}

// LeaseTimeToLive answers an unknown lease with TTL -1 rather than an
// error, as etcd does.
func (ls *leaseService) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	resp, err := ls.srv.LeaseTimeToLive(ctx, r)
	switch {
	case isLeaseNotFound(err):
		resp = &pb.LeaseTimeToLiveResponse{Header: &pb.ResponseHeader{}, ID: r.ID, TTL: -1}
	case err != nil:
		return nil, toLeaseGRPCError(err)
	}
	if resp.Header == nil {
		resp.Header = &pb.ResponseHeader{}
	}
	ls.hdr.fill(resp.Header)
	return resp, nil
}

func (ls *leaseService) LeaseLeases(ctx context.Context, r *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	resp, err := ls.srv.LeaseLeases(ctx, r)
	switch {
	case isLeaseNotFound(err):
		resp = &pb.LeaseLeasesResponse{Header: &pb.ResponseHeader{}, Leases: []*pb.LeaseStatus{}}
	case err != nil:
		return nil, toLeaseGRPCError(err)
	}
	if resp.Header == nil {
		resp.Header = &pb.ResponseHeader{}
	}
	ls.hdr.fill(resp.Header)
	return resp, nil
}

// LeaseKeepAlive renews a lease for every request on the stream and
// answers each with the refreshed TTL; an unknown or expired lease gets
// TTL 0 (the client then stops keeping it alive), as etcd does. The
// request and response messages are reused across the stream: Send has
// marshaled a response by the time it returns.
func (ls *leaseService) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	ctx := stream.Context()
	req := &pb.LeaseKeepAliveRequest{}
	resp := &pb.LeaseKeepAliveResponse{Header: &pb.ResponseHeader{}}
	for {
		req.Reset()
		if err := stream.RecvMsg(req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if ctx.Err() == nil {
				ls.log.Warn("failed to receive lease keepalive request from gRPC stream", "error", err)
				ls.recvFailures.Inc()
			}
			return err
		}
		// The header is taken before the renewal so its revision is never
		// later than the keep-alive: a lease revoked at revision 3 must not
		// be reported kept alive at revision 4.
		*resp.Header = pb.ResponseHeader{}
		ls.hdr.fill(resp.Header)
		resp.ID = req.ID

		var ttl int64
		var err error
		if ls.checkRenew != nil {
			err = ls.checkRenew(ctx, req.ID)
		}
		if err == nil {
			ttl, err = ls.srv.LeaseRenew(ctx, req.ID)
		}
		if isLeaseNotFound(err) {
			ttl, err = 0, nil
		}
		if err != nil {
			return toLeaseGRPCError(err)
		}
		resp.TTL = ttl
		if err := stream.Send(resp); err != nil {
			if ctx.Err() == nil {
				ls.log.Warn("failed to send lease keepalive response to gRPC stream", "error", err)
				ls.sendFailures.Inc()
			}
			return err
		}
	}
}
