package server

import (
	"context"

	"github.com/coreos/go-semver/semver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
)

// Downgrade serves Maintenance.Downgrade as etcd 3.6 does:
//
//   - VALIDATE checks, after a linearizable read, that the target is the
//     previous minor version of the cluster version and that no job is
//     enabled; it answers with the cluster version (major.minor) read
//     before that read, as etcd does.
//   - ENABLE validates likewise and proposes the job (DowngradeInfoSet);
//     the leader's version monitor (clusterversion.go) then records the
//     target as the cluster version.
//   - CANCEL proposes the job's end if one is enabled. Whatever happens
//     it answers success with the cluster version, as etcd 3.6 does: a
//     failure, "no inflight downgrade job" included, is only logged.
//
// A MetaStore member keeps running as the etcd 3.6 it reports itself
// as, so the job never finishes by itself (etcd ends it once every
// member runs the target version): it stays enabled until cancelled,
// or until the members are replaced with etcd ones.
func (s *Server) Downgrade(ctx context.Context, r *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
	switch r.Action {
	case pb.DowngradeRequest_VALIDATE:
		return s.downgradeValidate(ctx, r.Version)
	case pb.DowngradeRequest_ENABLE:
		return s.downgradeEnable(ctx, r.Version)
	case pb.DowngradeRequest_CANCEL:
		return s.downgradeCancel(ctx)
	}
	return nil, ErrUnknownMethod
}

func (s *Server) downgradeValidate(ctx context.Context, version string) (*pb.DowngradeResponse, error) {
	target, err := membership.ParseDowngradeTarget(version)
	if err != nil {
		return nil, err
	}
	cv := s.cluster.Version()
	if cv == "" {
		return nil, membership.ErrClusterVersionUnavailable
	}
	if err := s.validateDowngrade(ctx, target); err != nil {
		return nil, err
	}
	return &pb.DowngradeResponse{Version: membership.MajorMinor(cv)}, nil
}

// validateDowngrade reads the job and the cluster version as of now (a
// linearizable read, so that a job just enabled through another member
// is seen) and checks the target against them.
func (s *Server) validateDowngrade(ctx context.Context, target semver.Version) error {
	if err := s.LinearizableRead(ctx); err != nil {
		return err
	}
	return membership.ValidateDowngrade(s.cluster.Version(), target, s.cluster.Downgrade())
}

func (s *Server) downgradeEnable(ctx context.Context, version string) (*pb.DowngradeResponse, error) {
	target, err := membership.ParseDowngradeTarget(version)
	if err == nil {
		err = s.validateDowngrade(ctx, target)
	}
	if err == nil {
		req := &membershippb.DowngradeInfoSetRequest{Enabled: true, Ver: target.String()}
		_, err = s.propose(ctx, &pb.InternalRaftRequest{DowngradeInfoSet: req})
	}
	if err != nil {
		s.log.Warn("reject downgrade request", "error", err)
		return nil, err
	}
	return &pb.DowngradeResponse{Version: membership.MajorMinor(s.cluster.Version())}, nil
}

func (s *Server) downgradeCancel(ctx context.Context) (*pb.DowngradeResponse, error) {
	if err := s.cancelDowngrade(ctx); err != nil {
		s.log.Warn("failed to cancel downgrade", "error", err)
	}
	return &pb.DowngradeResponse{Version: membership.MajorMinor(s.cluster.Version())}, nil
}

func (s *Server) cancelDowngrade(ctx context.Context) error {
	if err := s.LinearizableRead(ctx); err != nil {
		return err
	}
	if !s.cluster.Downgrade().Enabled {
		return membership.ErrNoInflightDowngrade
	}
	_, err := s.propose(ctx, &pb.InternalRaftRequest{DowngradeInfoSet: &membershippb.DowngradeInfoSetRequest{}})
	return err
}

// DowngradeInfo is the downgrade job as this member last applied it, for
// Maintenance.Status.
func (s *Server) DowngradeInfo() (enabled bool, target string) {
	d := s.cluster.Downgrade()
	return d.Enabled, d.TargetVersion
}
