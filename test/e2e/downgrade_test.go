package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/test/framework"
)

// TestDowngrade walks etcd 3.6's downgrade job through gRPC and etcdctl:
// validate refuses what is not the previous minor version, enable
// records the job (Status shows it), the leader's version monitor then
// moves the cluster version, and the storage version with it, to the
// target within a few seconds (etcd looks every 4 s); the job survives
// a restart; cancel clears it and the cluster version moves back. A
// second cancel answers success, as etcd 3.6 does (it only logs "no
// inflight downgrade job").
func TestDowngrade(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	m := pb.NewMaintenanceClient(s.cli.ActiveConnection())
	ctl := etcdctlRunner{t: t, ctx: ctx, cli: s.cluster.Etcdctl()}
	waitVersions(ctx, t, s, "3.6.0")

	validate := func(v string) (*pb.DowngradeResponse, error) {
		return m.Downgrade(ctx, &pb.DowngradeRequest{Action: pb.DowngradeRequest_VALIDATE, Version: v})
	}
	for v, want := range map[string]error{
		"3":   rpctypes.ErrGRPCWrongDowngradeVersionFormat,
		"abc": rpctypes.ErrGRPCWrongDowngradeVersionFormat,
		"3.6": rpctypes.ErrGRPCInvalidDowngradeTargetVersion,
		"3.4": rpctypes.ErrGRPCInvalidDowngradeTargetVersion,
		"3.7": rpctypes.ErrGRPCInvalidDowngradeTargetVersion,
	} {
		_, err := validate(v)
		requireRPCError(t, err, want)
		requireEtcdctlError(ctl, want, "downgrade", "validate", v)
	}
	resp, err := validate("3.5.2") // the patch version does not count
	if err != nil {
		t.Fatalf("validate 3.5.2: %v", err)
	}
	if resp.Version != "3.6" || resp.Header == nil || resp.Header.ClusterId == 0 || resp.Header.MemberId == 0 {
		t.Fatalf("validate 3.5.2 answered %+v, want version 3.6 and a header", resp)
	}
	ctl.expect("Downgrade validate success, cluster version 3.6\n", "downgrade", "validate", "3.5")
	requireDowngradeInfo(ctx, t, m, &pb.DowngradeInfo{})

	ctl.expect("Downgrade enable success, cluster version 3.6\n", "downgrade", "enable", "3.5")
	requireDowngradeInfo(ctx, t, m, &pb.DowngradeInfo{Enabled: true, TargetVersion: "3.5.0"})
	// Enabling again is refused: with the job in progress, or, once the
	// cluster version followed it, since 3.5 is then no longer the
	// previous minor version (which of the two depends on when the
	// leader's monitor looked, on etcd as on MetaStore).
	_, err = m.Downgrade(ctx, &pb.DowngradeRequest{Action: pb.DowngradeRequest_ENABLE, Version: "3.5"})
	if st, _ := status.FromError(err); err == nil ||
		(st.Message() != rpctypes.ErrorDesc(rpctypes.ErrGRPCDowngradeInProcess) && st.Message() != rpctypes.ErrorDesc(rpctypes.ErrGRPCInvalidDowngradeTargetVersion)) {
		t.Fatalf("enable 3.5 again: %v, want %v or %v", err, rpctypes.ErrGRPCDowngradeInProcess, rpctypes.ErrGRPCInvalidDowngradeTargetVersion)
	}

	waitVersions(ctx, t, s, "3.5.0")
	requireEtcdctlError(ctl, rpctypes.ErrGRPCInvalidDowngradeTargetVersion, "downgrade", "enable", "3.5")
	requireEtcdctlError(ctl, rpctypes.ErrGRPCDowngradeInProcess, "downgrade", "validate", "3.4")
	// etcdctl's columns: endpoint, ID, version, storage version, ...,
	// errors, downgrade target version, downgrade enabled.
	endpoint := ctl.ok("", "endpoint", "status")
	if cols := strings.Split(strings.TrimSuffix(endpoint, "\n"), ", "); len(cols) != 16 || cols[3] != "3.5.0" || cols[14] != "3.5.0" || cols[15] != "true" {
		t.Fatalf("endpoint status printed %q, want the storage version 3.5.0 and the downgrade target 3.5.0, enabled", endpoint)
	}

	// etcd_cluster_version keeps the label it had at 0.
	waitMetrics(ctx, t, newScraper(t, s.member()), map[string]metricCheck{
		"cluster version 3.5": equals("etcd_cluster_version", map[string]string{"cluster_version": "3.5"}, 1),
		"cluster version 3.6": equals("etcd_cluster_version", map[string]string{"cluster_version": "3.6"}, 0),
	})

	// A snapshot taken now is in etcd 3.5's schema: it has no storage
	// version, which etcdctl would print as "Server version".
	if out := ctl.ok("", "snapshot", "save", filepath.Join(t.TempDir(), "downgraded.db")); strings.Contains(out, "Server version") {
		t.Fatalf("snapshot save while downgraded printed %q, want no server (storage) version", out)
	}

	// The job and the cluster version are replicated state: a restart
	// finds them as they were.
	if _, err := s.member().Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	if err := s.member().Restart(ctx); err != nil {
		t.Fatal(err)
	}
	requireDowngradeInfo(ctx, t, m, &pb.DowngradeInfo{Enabled: true, TargetVersion: "3.5.0"})
	waitVersions(ctx, t, s, "3.5.0")

	ctl.expect("Downgrade cancel success, cluster version 3.5\n", "downgrade", "cancel")
	requireDowngradeInfo(ctx, t, m, &pb.DowngradeInfo{})
	ctl.expect("Downgrade cancel success, cluster version 3.5\n", "downgrade", "cancel")
	resp, err = m.Downgrade(ctx, &pb.DowngradeRequest{Action: pb.DowngradeRequest_CANCEL})
	if err != nil || resp.Header == nil {
		t.Fatalf("cancel with no job: %+v, %v; want success as etcd 3.6", resp, err)
	}
	waitVersions(ctx, t, s, "3.6.0")
	ctl.expect("Downgrade validate success, cluster version 3.6\n", "downgrade", "validate", "3.5")
}

// requireEtcdctlError runs etcdctl, expecting it to fail with want's
// message, as etcdctl prints it: "Error: <message>".
func requireEtcdctlError(ctl etcdctlRunner, want error, args ...string) {
	ctl.t.Helper()
	res, err := ctl.cli.Run(ctl.ctx, args...)
	if err != nil {
		ctl.t.Fatal(err)
	}
	line := "Error: " + rpctypes.ErrorDesc(want) + "\n"
	if res.ExitCode == 0 || res.Stdout != "" || !strings.HasSuffix(res.Stderr, line) {
		ctl.t.Fatalf("etcdctl %s: exit code %d, stdout %q, stderr %q; want a failure ending %q",
			strings.Join(args, " "), res.ExitCode, res.Stdout, res.Stderr, line)
	}
}

func requireDowngradeInfo(ctx context.Context, t *testing.T, m pb.MaintenanceClient, want *pb.DowngradeInfo) {
	t.Helper()
	st, err := m.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.DowngradeInfo == nil || st.DowngradeInfo.Enabled != want.Enabled || st.DowngradeInfo.TargetVersion != want.TargetVersion {
		t.Fatalf("status downgrade info %+v, want %+v", st.DowngradeInfo, want)
	}
}

// waitVersions polls the member until /version reports the cluster and
// storage version v, and Status the storage version v.
func waitVersions(ctx context.Context, t *testing.T, s *server, v string) {
	t.Helper()
	waitMemberVersions(ctx, t, s.member(), func() (*pb.StatusResponse, error) {
		st, err := s.cli.Status(ctx, s.member().ClientURL())
		if err != nil {
			return nil, err
		}
		return (*pb.StatusResponse)(st), nil
	}, v)
}

func waitMemberVersions(ctx context.Context, t *testing.T, m *framework.Member, statusOf func() (*pb.StatusResponse, error), v string) {
	t.Helper()
	var got struct{ Etcdcluster, Storage string }
	var storage string
	for {
		code, body, err := httpGet(ctx, m.ClientURL()+"/version")
		if err == nil && code == 200 && json.Unmarshal([]byte(body), &got) == nil && got.Etcdcluster == v && got.Storage == v {
			st, err := statusOf()
			if err == nil && st.StorageVersion == v {
				return
			}
			if err == nil {
				storage = st.StorageVersion
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: the versions never became %s: /version %+v, Status storage version %q", m.Name(), v, got, storage)
		case <-time.After(100 * time.Millisecond): // poll; the deadline is ctx's
		}
	}
}

// TestDowngradeCluster: a job enabled through a follower is the
// cluster's: the leader moves the cluster version, every member reports
// the job and the versions, and a cancel through another follower
// brings every member back to 3.6.
func TestDowngradeCluster(t *testing.T) {
	t.Parallel()
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	ctx := testContext(t, testTimeout)
	mc := newMemberClients(t, c)
	leader := mc.waitLeader(ctx, t, c.Members())
	followers := others(c.Members(), leader)
	each := func(check func(m *framework.Member, statusOf func() (*pb.StatusResponse, error))) {
		for _, m := range c.Members() {
			check(m, func() (*pb.StatusResponse, error) { return mc.status(ctx, t, m) })
		}
	}
	each(func(m *framework.Member, statusOf func() (*pb.StatusResponse, error)) {
		waitMemberVersions(ctx, t, m, statusOf, "3.6.0")
	})

	enable := pb.NewMaintenanceClient(mc.of(t, followers[0]).ActiveConnection())
	resp, err := enable.Downgrade(ctx, &pb.DowngradeRequest{Action: pb.DowngradeRequest_ENABLE, Version: "3.5"})
	if err != nil || resp.Version != "3.6" {
		t.Fatalf("enable 3.5 through %s: %+v, %v; want cluster version 3.6", followers[0].Name(), resp, err)
	}
	each(func(m *framework.Member, statusOf func() (*pb.StatusResponse, error)) {
		waitMemberVersions(ctx, t, m, statusOf, "3.5.0")
		st, err := statusOf()
		if err != nil || !st.DowngradeInfo.GetEnabled() || st.DowngradeInfo.GetTargetVersion() != "3.5.0" {
			t.Fatalf("%s: status %v, %v; want the job to 3.5.0", m.Name(), st.GetDowngradeInfo(), err)
		}
	})

	cancel := pb.NewMaintenanceClient(mc.of(t, followers[1]).ActiveConnection())
	if _, err := cancel.Downgrade(ctx, &pb.DowngradeRequest{Action: pb.DowngradeRequest_CANCEL}); err != nil {
		t.Fatalf("cancel through %s: %v", followers[1].Name(), err)
	}
	each(func(m *framework.Member, statusOf func() (*pb.StatusResponse, error)) {
		waitMemberVersions(ctx, t, m, statusOf, "3.6.0")
		if st, err := statusOf(); err != nil || st.DowngradeInfo.GetEnabled() {
			t.Fatalf("%s: status %v, %v; want no job", m.Name(), st.GetDowngradeInfo(), err)
		}
	})
}
