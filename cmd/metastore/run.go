package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/credentials"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/host/gcheadroom"
	"github.com/metastore-io/metastore/internal/host/logging"
	"github.com/metastore-io/metastore/internal/host/memlimit"
	"github.com/metastore-io/metastore/internal/host/sdnotify"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/member"
	"github.com/metastore-io/metastore/internal/rocksdb"
	"github.com/metastore-io/metastore/internal/server"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// run serves until SIGTERM/SIGINT, then stops gracefully. fs is the flag
// set the options came from (the command line or the config file). The
// member (internal/server) owns and orders everything it serves; run
// builds its configuration and waits.
func run(ctx context.Context, o *options, fs *pflag.FlagSet, notes configFileNotes) error {
	built, err := newLogger(o)
	if err != nil {
		return err
	}
	defer built.Close()
	logger := built.Logger
	logStartup(o, fs, notes, logger)
	ctx, stop := signal.NotifyContext(ctxOrBackground(ctx), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := o.discovery.bootstrap(ctx, o, logger); err != nil {
		return err
	}
	defer startGCHeadroom(o, logger)()
	if o.pprofEnabled() {
		// etcd samples 1 in 5 mutex contention events once profiling is
		// on, unless the process already chose a rate.
		if runtime.SetMutexProfileFraction(-1) == 0 {
			runtime.SetMutexProfileFraction(5)
		}
		logger.Info("pprof is enabled", "path", "/debug/pprof")
	}
	certs, err := o.tls.load(o, logger)
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		o.features.metrics())

	cfg, err := memberConfig(o, fs, certs, registry, logger)
	if err != nil {
		return err
	}
	logStarting(o, cfg.Server, logger)
	// The member owns the listeners from here on, also if it fails to
	// start; it serves peers at once and clients once it is ready.
	m, err := member.Start(ctx, cfg)
	if err != nil {
		cfg.Server.Backend.Close()
		return err
	}
	waitForStop(ctx, m, logger)
	m.Stop()
	if err := m.Err(); !errors.Is(err, server.ErrRemoved) {
		return err
	}
	// A member removed from its cluster has done what it was told: etcd
	// exits 0 then, so that a supervisor restarting only on failure
	// leaves it stopped.
	return nil
}

// startGCHeadroom sizes the collector's headroom for a heap that is
// mostly the key index (see package gcheadroom) until the returned
// function stops it and restores the runtime's target.
func startGCHeadroom(o *options, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		gcheadroom.Run(ctx, o.gcHeadroom(logger))
	}()
	return func() {
		cancel()
		<-done
	}
}

// memberConfig is the member's configuration from the flags: the
// listeners bound (before the member starts, so a port conflict fails
// fast and clients and peers queue in the backlog until they are served)
// and the storage engine opened. On error nothing stays open.
func memberConfig(o *options, fs *pflag.FlagSet, certs materials, registry *prometheus.Registry, logger *slog.Logger) (member.Config, error) {
	if err := convertEtcdDataDir(o, logger); err != nil {
		return member.Config{}, err
	}
	ls, err := o.bindListeners(certs, logger)
	if err != nil {
		return member.Config{}, err
	}
	backend, err := openBackend(o, logger)
	if err != nil {
		ls.close()
		return member.Config{}, err
	}
	cfg := member.Config{
		Server:          o.serverConfig(certs, registry, logger),
		Client:          o.clientConfig(registry, logger),
		ClientListeners: ls.clients,
		LockDelay:       o.lockServiceLockDelay,
	}
	cfg.Server.Backend = backend
	cfg.Server.PeerListeners = ls.peers
	cfg.Client.GatewayTarget, cfg.Client.GatewayCreds = ls.gatewayTarget, ls.gatewayCreds
	o.ops.apply(&cfg.Server, &o.features)
	o.raft.apply(&cfg.Server, fs)
	if o.features.Enabled("SetMemberLocalAddr") {
		cfg.Server.PeerLocalAddr = inferLocalAddr(cfg.Server.PeerURLs, logger)
	}
	return cfg, nil
}

// inferLocalAddr is etcd's InferLocalAddr (--feature-gates=
// SetMemberLocalAddr=true): the first advertised peer URL whose host is
// an IP address that is neither loopback nor unspecified becomes the
// local address of the member's connections to its peers, so that a peer
// checking the member's client certificate against the address it comes
// from sees the advertised one. "" when there is none.
func inferLocalAddr(peerURLs []string, logger *slog.Logger) string {
	logger.Info("searching for a suitable member local address in AdvertisePeerURLs", "advertise-peer-urls", peerURLs)
	for _, raw := range peerURLs {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		addr, err := netip.ParseAddr(u.Hostname())
		if err != nil || addr.IsLoopback() || addr.IsUnspecified() {
			continue
		}
		logger.Info("setting member local address", "LocalAddr", addr.String())
		return addr.String()
	}
	logger.Warn("unable to set a member local address due to lack of suitable local addresses", "advertise-peer-urls", peerURLs)
	return ""
}

// memberListeners are the sockets the member is handed, bound, and how
// the JSON gateway of a separate HTTP listener dials gRPC.
type memberListeners struct {
	peers         []net.Listener
	clients       []member.ClientListener // client, client HTTP and metrics listeners
	gatewayTarget string
	gatewayCreds  credentials.TransportCredentials
}

func (ls memberListeners) close() {
	for _, l := range ls.peers {
		l.Close()
	}
	for _, cl := range ls.clients {
		cl.Listener.Close()
	}
}

// bindListeners binds the peer and client listeners of the flags; on
// error none stays open.
func (o *options) bindListeners(certs materials, logger *slog.Logger) (ls memberListeners, err error) {
	var bound clientListeners
	defer func() {
		if err != nil {
			for _, l := range ls.peers {
				l.Close()
			}
			bound.close()
		}
	}()
	for _, u := range splitURLs(o.listenPeerURLs) {
		l, err := o.listen.listen(u)
		if err != nil {
			return ls, fmt.Errorf("listen for peers on %s: %w", u, err)
		}
		ls.peers = append(ls.peers, wrapListener(l, u, certs.peer, "peer", logger))
	}
	if bound, err = o.openClientListeners(certs.client, logger); err != nil {
		return ls, err
	}
	if ls.gatewayCreds, err = bound.gatewayCreds(certs.client); err != nil {
		return ls, fmt.Errorf("client TLS: %w", err)
	}
	if ls.clients, err = bound.serverListeners(certs.client, logger); err != nil {
		return ls, err
	}
	ls.gatewayTarget = bound.gatewayTarget()
	return ls, nil
}

// serverConfig is the member's configuration from the flags, without
// what is opened for it (backend, listeners) and what the ops and raft
// flag groups set.
func (o *options) serverConfig(certs materials, registry *prometheus.Registry, logger *slog.Logger) member.ServerConfig {
	initial, _ := membership.ParseInitialCluster(o.initialCluster) // validated
	return member.ServerConfig{
		Name:                        o.name,
		DataDir:                     o.dataDir,
		InitialCluster:              initial,
		InitialClusterToken:         o.initialClusterToken,
		NewCluster:                  o.initialClusterState == "new",
		PeerURLs:                    splitURLs(o.initialAdvertisePeerURLs),
		ClientURLs:                  splitURLs(o.advertiseClientURLs),
		SnapshotCount:               o.snapshotCount,
		MaxRequestBytes:             o.maxRequestBytes,
		MaxTxnOps:                   o.maxTxnOps,
		CompactionBatchLimit:        o.compactionBatchLimit,
		TickInterval:                time.Duration(o.heartbeatMs) * time.Millisecond,
		WatchProgressNotifyInterval: o.watchProgressInterval,
		ElectionTicks:               int(o.electionMs / o.heartbeatMs),
		StrictReconfigCheck:         o.strictReconfigCheck,
		MaxLearners:                 o.maxLearners,
		Auth:                        o.auth.options(o.tls.client.ClientCertAuth),
		Logger:                      logger,
		Metrics:                     registry,
		PeerTLS:                     peerClientTLS(certs.peer),
		Memory:                      memlimit.FromRuntime(),
	}
}

// clientConfig is the configuration of etcd's client services from the
// flags, without the gateway's dial target (bindListeners).
func (o *options) clientConfig(registry *prometheus.Registry, logger *slog.Logger) etcdcompat.Config {
	return etcdcompat.Config{
		MaxRequestBytes:   o.maxRequestBytes,
		MaxSendBytes:      o.maxSendBytes,
		MaxTxnOps:         o.maxTxnOps,
		Logger:            logger,
		Metrics:           registry,
		MetricsRegisterer: registry,
		ExtensiveMetrics:  o.metrics == "extensive",
		EnablePprof:       o.pprofEnabled(),

		MaxConcurrentStreams: o.listen.maxConcurrentStreams,
		KeepAliveMinTime:     o.listen.keepAliveMinTime,
		KeepAliveInterval:    o.listen.keepAliveInterval,
		KeepAliveTimeout:     o.listen.keepAliveTimeout,
		DisableGateway:       !o.listen.enableGateway,
		CORS:                 uniqueStrings(o.listen.cors),
		HostWhitelist:        uniqueStrings(o.listen.hostWhitelist),
	}
}

// waitForStop returns on SIGTERM/SIGINT (ctx), or once the member stopped
// on its own: removed from the cluster, a fatal error, or a listener that
// failed. Once the member is ready it tells systemd, as etcd does: a unit
// of Type=notify counts the member started once it serves clients.
func waitForStop(ctx context.Context, srv *member.Member, logger *slog.Logger) {
	ready := srv.Ready()
	for {
		select {
		case <-ready:
			ready = nil
			if sent, err := sdnotify.Ready(); err != nil {
				logger.Warn("failed to notify systemd for readiness", "error", err)
			} else if sent {
				logger.Info("successfully notified init daemon")
			}
		case <-ctx.Done():
			logger.Info("received signal, stopping gracefully")
			return
		case <-srv.Done():
			return
		}
	}
}

func ctxOrBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// openBackend opens the storage engine of the flags (member.OpenBackend);
// an unknown engine or bad RocksDB options are usage errors.
func openBackend(o *options, logger *slog.Logger) (kvstore.Backend, error) {
	var rocks rocksdb.Options
	switch o.storageEngine {
	case member.EngineMemory:
	case member.EngineRocksDB:
		opts, err := o.rocksdbOptions(logger)
		if err != nil {
			return nil, usageError{err}
		}
		rocks = opts
	default:
		return nil, usageError{fmt.Errorf("unknown --storage-engine %q", o.storageEngine)}
	}
	return member.OpenBackend(o.dataDir, o.storageEngine, rocks)
}

// newLogger builds etcd's logger from the --log-* flags (etcd's defaults
// for any left empty, as in the snapshot commands).
func newLogger(o *options) (logging.Logger, error) {
	c := o.logConfig()
	if c.Logger == "" {
		c.Logger = "zap"
	}
	l, err := logging.New(c)
	if err != nil {
		return l, err
	}
	return l, nil
}

// logStartup logs, once, what etcd logs about the configuration: the
// config file, deprecated flags, and which flags have no effect here.
func logStartup(o *options, fs *pflag.FlagSet, notes configFileNotes, logger *slog.Logger) {
	if o.configFile != "" {
		logger.Info("loaded server configuration, other configuration command line flags and environment variables will be ignored if provided", "path", o.configFile)
		if len(notes.ignored) > 0 {
			logger.Warn("configuration file keys MetaStore does not read", "path", o.configFile, "keys", notes.ignored)
		}
	}
	warnDeprecated(fs, logger)
	logNoEffect(fs, logger)
	o.features.logNoEffect(logger)
	if len(o.listen.clientHTTPURLs) == 0 {
		logger.Warn("Running http and grpc server on single port. This is not recommended for production.")
	}
	if o.name == "default" {
		logger.Warn("it isn't recommended to use default name, please set a value for --name. "+
			"Note that etcd might run into issue when multiple members have the same default name", "name", o.name)
	}
}
