package version

import (
	"context"
	"errors"
	"log/slog"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/cluster/membership"
)

// Member is what the keeper needs of its member.
type Member interface {
	// Cluster is the replicated member list (its version and downgrade
	// job as applied so far).
	Cluster() *membership.Cluster
	// Leads reports whether the member still leads in term.
	Leads(term uint64) bool
	// Propose proposes req through raft and waits until it is applied.
	Propose(ctx context.Context, req *pb.InternalRaftRequest) error
	// LinearizableRead waits until everything committed before the call
	// is applied here (a ReadIndex round).
	LinearizableRead(ctx context.Context) error
}

// Keeper keeps the cluster version of one member's cluster.
type Keeper struct {
	m   Member
	log *slog.Logger
	// clusterVersion is what a new cluster records; serverVersion the
	// etcd server version every member reports itself as (the members'
	// lowest: MetaStore's members do not ask each other theirs).
	clusterVersion, serverVersion string
	reqTimeout                    time.Duration
	stopping                      <-chan struct{} // the member's
}

// New is the keeper of member m, whose requests are bounded by
// reqTimeout and which closes stopping when it begins to stop.
func New(m Member, log *slog.Logger, clusterVersion, serverVersion string, reqTimeout time.Duration, stopping <-chan struct{}) *Keeper {
	return &Keeper{m: m, log: log, clusterVersion: clusterVersion, serverVersion: serverVersion, reqTimeout: reqTimeout, stopping: stopping}
}

// clusterVersionRetry is how long a leader waits before it proposes the
// cluster version again after a failed attempt (etcd's monitor looks
// again every 4 s).
const clusterVersionRetry = time.Second

// SetInitial proposes the cluster version until it is recorded,
// this member stops leading in term, or the member stops. It runs when
// this member, leading in term, has applied its own first entry of the
// term and found no cluster version recorded (the state
// machine's NoticeClusterVersion): like etcd's monitorClusterVersions woken by
// FirstCommitInTermNotify, a leader proposes one (a ClusterVersionSet
// entry, as etcd's leader does once, when a new cluster starts), so that
// the raft log holds the entries etcd's does and reports the same
// indexes.
func (k *Keeper) SetInitial(term uint64) {
	version := k.clusterVersion
	// etcd logs the version as major.minor ("3.6").
	logged := membership.MajorMinor(version)
	k.log.Info("setting up initial cluster version using v3 API", "cluster-version", logged)
	for k.m.Cluster().Version() == "" && k.m.Leads(term) {
		req := &pb.InternalRaftRequest{ClusterVersionSet: &membershippb.ClusterVersionSetRequest{Ver: version}}
		ctx, cancel := context.WithTimeout(context.Background(), k.reqTimeout)
		err := k.m.Propose(ctx, req)
		cancel()
		if err == nil {
			k.log.Info("cluster version is updated", "cluster-version", logged)
			return
		}
		if errors.Is(err, membererr.ErrStopped) {
			k.log.Warn("aborting cluster version update; server is stopped", "error", err)
			return
		}
		k.log.Warn("failed to update cluster version", "error", err)
		t := time.NewTimer(clusterVersionRetry)
		select {
		case <-k.stopping:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// MonitorInterval is how often the leader looks whether the
// cluster version should change, etcd's monitorVersionInterval
// (rafthttp's 5 s connection write timeout less a second).
const MonitorInterval = 4 * time.Second

// Check is one look of etcd's monitorClusterVersions once the cluster
// version is recorded, which the leader takes every MonitorInterval: it
// decides the version again (membership.NextClusterVersion) and records
// a change with a ClusterVersionSet entry. It moves to a downgrade job's
// target once the job is enabled, and back up to the members' version
// once the job is cancelled.
func (k *Keeper) Check() {
	cv := k.m.Cluster().Version()
	next, ok, err := membership.NextClusterVersion(cv, k.serverVersion, k.m.Cluster().Downgrade())
	if err != nil {
		k.log.Error("Failed to monitor cluster version", "error", err)
	}
	if ok {
		k.update(cv, next)
	}
}

// update proposes the cluster version once, as etcd's
// updateClusterVersionV3: a failure is logged, and the next look of the
// monitor tries again.
func (k *Keeper) update(from, to string) {
	k.log.Info("updating cluster version using v3 API", "from", membership.MajorMinor(from), "to", membership.MajorMinor(to))
	req := &pb.InternalRaftRequest{ClusterVersionSet: &membershippb.ClusterVersionSetRequest{Ver: to}}
	ctx, cancel := context.WithTimeout(context.Background(), k.reqTimeout)
	err := k.m.Propose(ctx, req)
	cancel()
	switch {
	case err == nil:
		k.log.Info("cluster version is updated", "cluster-version", membership.MajorMinor(to))
		if d := k.m.Cluster().Downgrade(); d.Enabled && d.TargetVersion == to {
			// etcd says so once its storage follows the cluster
			// version; MetaStore's storage version is the cluster
			// version itself.
			k.log.Info("The server is ready to downgrade", "target-version", d.TargetVersion, "server-version", k.serverVersion)
		}
	case errors.Is(err, membererr.ErrStopped):
		k.log.Warn("aborting cluster version update; server is stopped", "error", err)
	default:
		k.log.Warn("failed to update cluster version", "error", err)
	}
}
