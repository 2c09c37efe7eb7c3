package version

import (
	"context"

	"github.com/coreos/go-semver/semver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
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
func (k *Keeper) Downgrade(ctx context.Context, r *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
	switch r.Action {
	case pb.DowngradeRequest_VALIDATE:
		return k.downgradeValidate(ctx, r.Version)
	case pb.DowngradeRequest_ENABLE:
		return k.downgradeEnable(ctx, r.Version)
	case pb.DowngradeRequest_CANCEL:
		return k.downgradeCancel(ctx)
	}
	return nil, membererr.ErrUnknownMethod
}

func (k *Keeper) downgradeValidate(ctx context.Context, version string) (*pb.DowngradeResponse, error) {
	target, err := membership.ParseDowngradeTarget(version)
	if err != nil {
		return nil, err
	}
	cv := k.m.Cluster().Version()
	if cv == "" {
		return nil, membership.ErrClusterVersionUnavailable
	}
	if err := k.validateDowngrade(ctx, target); err != nil {
		return nil, err
	}
	return &pb.DowngradeResponse{Version: membership.MajorMinor(cv)}, nil
}

// validateDowngrade reads the job and the cluster version as of now (a
// linearizable read, so that a job just enabled through another member
// is seen) and checks the target against them.
func (k *Keeper) validateDowngrade(ctx context.Context, target semver.Version) error {
	if err := k.m.LinearizableRead(ctx); err != nil {
		return err
	}
	return membership.ValidateDowngrade(k.m.Cluster().Version(), target, k.m.Cluster().Downgrade())
}

func (k *Keeper) downgradeEnable(ctx context.Context, version string) (*pb.DowngradeResponse, error) {
	target, err := membership.ParseDowngradeTarget(version)
	if err == nil {
		err = k.validateDowngrade(ctx, target)
	}
	if err == nil {
		req := &membershippb.DowngradeInfoSetRequest{Enabled: true, Ver: target.String()}
		err = k.m.Propose(ctx, &pb.InternalRaftRequest{DowngradeInfoSet: req})
	}
	if err != nil {
		k.log.Warn("reject downgrade request", "error", err)
		return nil, err
	}
	return &pb.DowngradeResponse{Version: membership.MajorMinor(k.m.Cluster().Version())}, nil
}

func (k *Keeper) downgradeCancel(ctx context.Context) (*pb.DowngradeResponse, error) {
	if err := k.cancelDowngrade(ctx); err != nil {
		k.log.Warn("failed to cancel downgrade", "error", err)
	}
	return &pb.DowngradeResponse{Version: membership.MajorMinor(k.m.Cluster().Version())}, nil
}

func (k *Keeper) cancelDowngrade(ctx context.Context) error {
	if err := k.m.LinearizableRead(ctx); err != nil {
		return err
	}
	if !k.m.Cluster().Downgrade().Enabled {
		return membership.ErrNoInflightDowngrade
	}
	return k.m.Propose(ctx, &pb.InternalRaftRequest{DowngradeInfoSet: &membershippb.DowngradeInfoSetRequest{}})
}
