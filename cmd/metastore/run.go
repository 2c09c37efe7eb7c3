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

	"github.com/metastore-io/metastore/internal/gcheadroom"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/membership"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/internal/rocksdb"
	"github.com/metastore-io/metastore/internal/sdnotify"
	"github.com/metastore-io/metastore/internal/server"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// drainTimeout bounds how long a graceful stop waits for in-flight RPCs.
const drainTimeout = 10 * time.Second

// run serves until SIGTERM/SIGINT, then stops gracefully.
func run(ctx context.Context, o *options) error {
	logger := newLogger(o)
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
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Bind the client and peer listeners before starting the member, so a
	// port conflict fails fast, and clients and peers queue in the backlog
	// until they are served.
	var listeners, peerListeners []net.Listener
	var clientURLs []string // of listeners
	defer func() {
		for _, l := range append(listeners, peerListeners...) {
			l.Close()
		}
	}()
	for _, u := range splitURLs(o.listenPeerURLs) {
		addr, err := listenAddr(u)
		if err != nil {
			return usageError{err}
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen for peers on %s: %w", u, err)
		}
		peerListeners = append(peerListeners, wrapListener(l, u, certs.peer, "peer", logger))
	}
	for _, u := range splitURLs(o.listenClientURLs) {
		addr, err := listenAddr(u)
		if err != nil {
			return usageError{err}
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen for clients on %s: %w", u, err)
		}
		listeners = append(listeners, wrapListener(l, u, certs.client, "client", logger))
		clientURLs = append(clientURLs, u)
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
		Auth:                        o.auth.options(false),
		Logger:                      logger,
		Metrics:                     registry,
		PeerTLS:                     peerClientTLS(certs.peer),
	}
	o.ops.apply(&cfg)
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

	clients, err := etcdcompat.NewClientServer(etcdcompat.Config{
		Member:            srv.ClientMember(),
		MaxRequestBytes:   o.maxRequestBytes,
		MaxTxnOps:         o.maxTxnOps,
		Logger:            logger,
		Metrics:           registry,
		MetricsRegisterer: registry,
		ExtensiveMetrics:  o.metrics == "extensive",
		EnablePprof:       o.pprofEnabled(),
	})
	if err != nil {
		srv.Stop()
		return err
	}
	serveErr := make(chan error, len(listeners))
	for i, l := range listeners {
		if isTLSURL(clientURLs[i]) {
			gatewayTLS, err := certs.client.GatewayConfig()
			if err != nil {
				srv.Stop()
				return fmt.Errorf("client TLS: %w", err)
			}
			logger.Info("serving client traffic securely", "address", l.Addr().String())
			go func(l net.Listener) { serveErr <- clients.ServeTLS(l, gatewayTLS) }(l)
			continue
		}
		logger.Info("serving client traffic insecurely; this is strongly discouraged!", "address", l.Addr().String())
		go func(l net.Listener) { serveErr <- clients.Serve(l) }(l)
	}
	listeners = nil // owned by the client server now
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

func newLogger(o *options) *slog.Logger {
	level, _ := parseLevel(o.logLevel)
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(os.Stderr, hopts)
	if o.logFormat == "text" {
		h = slog.NewTextHandler(os.Stderr, hopts)
	}
	return slog.New(h).With("name", o.name)
}
