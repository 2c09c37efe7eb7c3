package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/metastore-io/metastore/internal/member"
	"github.com/metastore-io/metastore/internal/statemachine"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// logStarting logs etcd's "starting an etcd server" line (embed.StartEtcd)
// once the listeners are bound and before the member starts, with etcd's
// field names in etcd's order, so that the tools that read it (etcd's own
// test framework looks for "snapshot-catchup-entries", log pipelines for
// the URLs) find what they find in etcd's. Fields etcd fills from parts
// MetaStore does not have (bbolt, v2 discovery's proxy, tracing) carry the
// flag's value as etcd would log it.
func logStarting(o *options, cfg member.ServerConfig, logger *slog.Logger) {
	quota := cfg.QuotaBackendBytes
	if quota == 0 {
		quota = statemachine.DefaultQuotaBytes
	}
	// A restarted member takes its cluster from its log; etcd then logs
	// the initial cluster and token as empty.
	initialized := memberInitialized(o)
	initialCluster, token := o.initialCluster, o.initialClusterToken
	if initialized {
		initialCluster, token = "", ""
	}
	d := &o.discovery
	logger.Info("starting an etcd server",
		"etcd-version", etcdcompat.EtcdServerVersion,
		"git-sha", "metastore-"+Version,
		"go-version", runtime.Version(),
		"go-os", runtime.GOOS,
		"go-arch", runtime.GOARCH,
		"max-cpu-set", runtime.GOMAXPROCS(0),
		"max-cpu-available", runtime.NumCPU(),
		"member-initialized", initialized,
		"name", o.name,
		"data-dir", o.dataDir,
		"wal-dir", o.ops.walDir,
		"wal-dir-dedicated", o.ops.walDir,
		"member-dir", filepath.Join(o.dataDir, "member"),
		"force-new-cluster", o.ops.forceNew,
		"heartbeat-interval", (time.Duration(o.heartbeatMs) * time.Millisecond).String(),
		"election-timeout", (time.Duration(o.electionMs) * time.Millisecond).String(),
		"initial-election-tick-advance", o.raft.initialElectionTickAdvance,
		"snapshot-count", o.snapshotCount,
		"max-wals", o.ops.maxWALs,
		"max-snapshots", o.ops.maxSnapshots,
		"snapshot-catchup-entries", o.raft.snapshotCatchUpEntries,
		"initial-advertise-peer-urls", splitURLs(o.initialAdvertisePeerURLs),
		"listen-peer-urls", splitURLs(o.listenPeerURLs),
		"advertise-client-urls", splitURLs(o.advertiseClientURLs),
		"listen-client-urls", splitURLs(o.listenClientURLs),
		"listen-metrics-urls", nonNil(o.listen.metricsURLs),
		"experimental-local-address", "",
		"cors", sortedUnique(o.listen.cors),
		"host-whitelist", sortedUnique(o.listen.hostWhitelist),
		"initial-cluster", initialCluster,
		"initial-cluster-state", o.initialClusterState,
		"initial-cluster-token", token,
		"quota-backend-bytes", quota,
		"max-request-bytes", o.maxRequestBytes,
		"max-concurrent-streams", o.listen.maxConcurrentStreams,
		"pre-vote", o.raft.preVote,
		"feature-gates", o.features.String(),
		"initial-corrupt-check", cfg.InitialCorruptCheck,
		"corrupt-check-time-interval", o.ops.corruptCheckTime.String(),
		"compact-check-time-interval", o.ops.compactHashCheckTime.String(),
		"auto-compaction-mode", o.ops.autoCompactionMode,
		"auto-compaction-retention", o.ops.retention.String(),
		"auto-compaction-interval", o.ops.retention.String(),
		"discovery-url", d.url,
		"discovery-proxy", d.proxy,
		"discovery-token", d.token,
		"discovery-endpoints", strings.Join(d.endpoints, ","),
		"discovery-dial-timeout", d.dialTimeout.String(),
		"discovery-request-timeout", d.requestTimeout.String(),
		"discovery-keepalive-time", d.keepAliveTime.String(),
		"discovery-keepalive-timeout", d.keepAliveTimeout.String(),
		"discovery-insecure-transport", d.insecure,
		"discovery-insecure-skip-tls-verify", d.skipTLSVerify,
		"discovery-cert", d.cert,
		"discovery-key", d.key,
		"discovery-cacert", d.cacert,
		"discovery-user", d.user,
		"downgrade-check-interval", o.noEffect.downgradeCheck.String(),
		"max-learners", o.maxLearners,
		"v2-deprecation", effectiveV2Deprecation(o.noEffect.v2Deprecation),
	)
	if mb := o.noEffect.bootstrapDefragMB; mb > 0 {
		// etcd logs this when its bbolt file is below the threshold; a
		// MetaStore member never defragments at start (the flag is
		// logged as without effect too), so it always skips.
		logger.Info("Skipping defragmentation",
			"experimental-bootstrap-defrag-threshold-bytes", uint64(mb)<<20,
			"reason", noEffectReasons["bootstrap-defrag-threshold-megabytes"])
	}
}

// effectiveV2Deprecation is the level etcd 3.6 keeps of --v2-deprecation
// (etcdmain's configFromCmdLine): write-only-skip-check as given, anything
// else replaced by the default, write-only.
func effectiveV2Deprecation(level string) string {
	if level == "write-only-skip-check" {
		return level
	}
	return "write-only"
}

// memberInitialized reports what etcd reports: whether the data dir
// already holds a member's log.
func memberInitialized(o *options) bool {
	dir := o.ops.walDir
	if dir == "" {
		dir = filepath.Join(o.dataDir, "member", "wal")
	}
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) > 0
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sortedUnique(s []string) []string {
	out := slices.Clone(uniqueStrings(s))
	slices.Sort(out)
	return nonNil(out)
}
