package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/gcheadroom"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/logging"
	"github.com/metastore-io/metastore/internal/membership"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/internal/rocksdb"
	"github.com/metastore-io/metastore/internal/sdnotify"
	"github.com/metastore-io/metastore/internal/server"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// drainTimeout bounds how long a graceful stop waits for in-flight RPCs.
const drainTimeout = 10 * time.Second

// run serves until SIGTERM/SIGINT, then stops gracefully. fs is the flag
// set the options came from (the command line or the config file).
func run(ctx context.Context, o *options, fs *pflag.FlagSet, notes configFileNotes) error {
	built, err := newLogger(o)
	if err != nil {
		return err
	}
	defer built.Close()
	logger := built.Logger
	logStartup(o, fs, notes, logger)
	if err := o.discovery.refuseUnbootstrapped(o.dataDir); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctxOrBackground(ctx), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	backend, err := openBackend(o, logger)
	if err != nil {
		return err
	}
	initial, _ := membership.ParseInitialCluster(o.initialCluster) // validated

	// Size the collector's headroom for a heap that is mostly the key
	// index (see package gcheadroom); stopped, and the runtime's target
	// restored, when run returns.
	gcCtx, stopGC := context.WithCancel(context.Background())
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		gcheadroom.Run(gcCtx, o.gcHeadroom(logger))
	}()
	defer func() {
		stopGC()
		<-gcDone
	}()

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

	// Bind the client and peer listeners before starting the member, so a
	// port conflict fails fast, and clients and peers queue in the backlog
	// until they are served.
	var peerListeners []net.Listener
	var bound clientListeners
	defer func() {
		for _, l := range peerListeners {
			l.Close()
		}
		bound.close()
	}()
	for _, u := range splitURLs(o.listenPeerURLs) {
		l, err := o.listen.listen(u)
		if err != nil {
			return fmt.Errorf("listen for peers on %s: %w", u, err)
		}
		peerListeners = append(peerListeners, wrapListener(l, u, certs.peer, "peer", logger))
	}
	if bound, err = o.openClientListeners(certs.client, logger); err != nil {
		return err
	}

	cfg := server.Config{
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
		TickInterval:                time.Duration(o.heartbeatMs) * time.Millisecond,
		WatchProgressNotifyInterval: o.watchProgressInterval,
		ElectionTicks:               int(o.electionMs / o.heartbeatMs),
		StrictReconfigCheck:         o.strictReconfigCheck,
		MaxLearners:                 o.maxLearners,
		Backend:                     backend,
		Auth:                        o.auth.options(o.tls.client.ClientCertAuth),
		Logger:                      logger,
		Metrics:                     registry,
		PeerTLS:                     peerClientTLS(certs.peer),
	}
	o.ops.apply(&cfg, &o.features)
	o.raft.apply(&cfg, fs)
	srv, err := server.New(cfg)
	if err != nil {
		backend.Close()
		return err
	}

	// Peers are served at once: raft needs them to elect a leader (and a
	// joining member to receive the state) before this member is ready.
	peers := servePeers(peerListeners, srv, logger)
	peerListeners = nil // owned by the peer servers now
	defer peers.stop()

	select {
	case <-srv.Ready():
	case <-ctx.Done():
		srv.Stop()
		return nil
	case <-srv.Done():
		return srv.Err()
	}

	gatewayCreds, err := bound.gatewayCreds(certs.client)
	if err != nil {
		srv.Stop()
		return fmt.Errorf("client TLS: %w", err)
	}
	clients, err := etcdcompat.NewClientServer(etcdcompat.Config{
		Member:            srv.ClientMember(),
		MaxRequestBytes:   o.maxRequestBytes,
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
		GatewayTarget:        bound.gatewayTarget(),
		GatewayCreds:         gatewayCreds,
	})
	if err != nil {
		srv.Stop()
		return err
	}
	serveErr := bound.serve(clients, certs.client, logger)
	bound = clientListeners{} // owned by the client server now
	// As etcd: a systemd unit of Type=notify counts the member started now.
	if sent, err := sdnotify.Ready(); err != nil {
		logger.Warn("failed to notify systemd for readiness", "error", err)
	} else if sent {
		logger.Info("successfully notified init daemon")
	}

	var result error
	select {
	case <-ctx.Done():
		logger.Info("received signal, stopping gracefully")
	case err := <-serveErr:
		if err != nil {
			result = fmt.Errorf("serve clients: %w", err)
		}
	case err := <-peers.errc:
		result = fmt.Errorf("serve peers: %w", err)
	case <-srv.Done():
		// Stopped on its own: removed from the cluster, or a fatal error.
		result = srv.Err()
	}
	drainCtx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	// Watch streams never end by themselves: end them first so the drain
	// waits only for unary RPCs (their clients get etcd's "server stopped").
	srv.WatchHub().Close()
	clients.Stop(drainCtx)
	srv.Stop()
	return result
}

// peerServers serve the peer listeners.
type peerServers struct {
	servers []*http.Server
	errc    chan error
}

// servePeers serves srv's peer handler (the transport and /members) on
// every peer listener.
func servePeers(listeners []net.Listener, srv *server.Server, logger *slog.Logger) *peerServers {
	ps := &peerServers{errc: make(chan error, len(listeners))}
	for _, l := range listeners {
		hs := &http.Server{Handler: srv.PeerHandler(), ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		srv.ConfigurePeerServer(hs)
		ps.servers = append(ps.servers, hs)
		logger.Info("serving peer traffic", "address", l.Addr().String())
		go func(l net.Listener) {
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				ps.errc <- err
			}
		}(l)
	}
	return ps
}

// stop closes the peer listeners and their connections; the member has
// stopped talking to peers by then.
func (ps *peerServers) stop() {
	for _, hs := range ps.servers {
		hs.Close()
	}
}

func ctxOrBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// openBackend opens the storage engine. The RocksDB engine keeps its files
// in <data-dir>/member/rocksdb, beside the WAL and snapshots.
func openBackend(o *options, logger *slog.Logger) (kvstore.Backend, error) {
	switch o.storageEngine {
	case "memory":
		return memory.New(), nil
	case "rocksdb":
		opts, err := o.rocksdbOptions(logger)
		if err != nil {
			return nil, usageError{err}
		}
		dir := filepath.Join(o.dataDir, "member", "rocksdb")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		b, err := rocksdb.Open(dir, opts)
		if err != nil {
			return nil, fmt.Errorf("open RocksDB engine in %s: %w", dir, err)
		}
		return b, nil
	}
	return nil, usageError{fmt.Errorf("unknown --storage-engine %q", o.storageEngine)}
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
