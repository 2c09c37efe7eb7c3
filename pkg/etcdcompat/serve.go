package etcdcompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"sync"
	"time"

	gw "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/soheilhy/cmux"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	etcdgw "go.etcd.io/etcd/api/v3/etcdserverpb/gw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/metastore-io/metastore/internal/lockservice"
	"github.com/metastore-io/metastore/pkg/lockapi"
)

// grpcOverheadBytes is the headroom etcd adds to --max-request-bytes for the
// gRPC receive limit, so that a request just under the limit is rejected by
// our check with etcd's message rather than by gRPC's framing.
const grpcOverheadBytes = 512 * 1024

// Config configures the client-facing server.
type Config struct {
	Member          Member
	MaxRequestBytes uint
	MaxTxnOps       uint
	Logger          *slog.Logger
	// Metrics is served on /metrics; nil serves an empty registry.
	Metrics prometheus.Gatherer
	// ExtensiveMetrics is etcd's --metrics=extensive: it adds the gRPC
	// handling-time histogram (grpc_server_handling_seconds).
	ExtensiveMetrics bool
	// EnablePprof serves the Go runtime profiles under /debug/pprof/ (etcd's
	// --enable-pprof). Off by default: a CPU profile or trace costs the
	// server CPU and anyone who can reach the client port can start one.
	EnablePprof bool
	// MetricsRegisterer receives the collectors of services living here:
	// etcd's client-facing series (grpc_server_*, etcd_network_client_*,
	// ...) and the HTTP lock service's; nil leaves them unregistered.
	MetricsRegisterer prometheus.Registerer
}

// ClientServer serves etcd's client protocol (gRPC, JSON gateway, HTTP
// endpoints) on one or more listeners.
type ClientServer struct {
	cfg    Config
	log    *slog.Logger
	grpc   *grpc.Server
	health *health.Server
	coord  *coordination        // etcd's v3lock and v3election services
	locks  *lockservice.Service // MetaStore's HTTP lock service, on coord's client
	m      *clientMetrics

	mu      sync.Mutex
	closers []func()
}

// NewClientServer builds the gRPC server with etcd's services registered.
func NewClientServer(cfg Config) (*ClientServer, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newClientMetrics(cfg.MetricsRegisterer, cfg.Metrics, cfg.ExtensiveMetrics)
	if err != nil {
		return nil, err
	}
	guard := leaderGuard{srv: cfg.Member, metrics: m}
	unary := []grpc.UnaryServerInterceptor{m.grpc.UnaryServerInterceptor(), guard.unary}
	stream := []grpc.StreamServerInterceptor{m.grpc.StreamServerInterceptor(), guard.stream}
	am, withAuth := cfg.Member.(AuthMember)
	if withAuth {
		unary = append(unary, authGuard{srv: am}.unary)
		stream = append(stream, authGuard{srv: am}.stream)
	}
	opts := append(m.serverOptions(),
		grpc.MaxRecvMsgSize(int(cfg.MaxRequestBytes)+grpcOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(math.MaxUint32),
		// Connections come decrypted from the listener; the credentials
		// only report the client's TLS state (serve_tls.go).
		grpc.Creds(tlsAwareCreds{}),
		// etcd's defaults: let clients ping every 5 s; probe idle clients
		// after 2 h and drop them after 20 s without an answer.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: false}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Hour, Timeout: 20 * time.Second}),
		// The metrics interceptors come first, as in etcd, so that
		// requests the guards refuse are counted too.
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	)
	gs := grpc.NewServer(opts...)
	hdr := headerFiller{srv: cfg.Member}
	pb.RegisterKVServer(gs, &kvService{srv: cfg.Member, hdr: hdr, maxTxnOps: int(cfg.MaxTxnOps)})
	pb.RegisterMaintenanceServer(gs, &maintenanceService{srv: cfg.Member, hdr: hdr})
	pb.RegisterClusterServer(gs, &clusterService{srv: cfg.Member})
	leases := newLeaseService(cfg.Member, hdr, cfg.Logger)
	leases.recvFailures, leases.sendFailures = m.leaseRecvFailures, m.leaseSendFailures
	pb.RegisterLeaseServer(gs, leases)
	watches := newWatchService(cfg.Member, cfg.Member, cfg.MaxRequestBytes, cfg.Logger)
	watches.recvFailures, watches.sendFailures = m.watchRecvFailures, m.watchSendFailures
	pb.RegisterWatchServer(gs, watches)
	if withAuth {
		// A member with etcd's authentication: its Auth service, and
		// the checks etcd makes before a request reaches the member.
		ag := authGuard{srv: am}
		leases.checkRenew = ag.leaseRenew
		watches.refusal = ag.watchRefusal
		pb.RegisterAuthServer(gs, &authService{srv: am, hdr: hdr})
	}
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	// etcd initializes the series of the services above, not those of
	// the lock and election services it registers afterwards.
	m.grpc.InitializeMetrics(gs)
	coord, err := newCoordination(cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("lock and election services: %w", err)
	}
	coord.register(gs)
	coord.serve(gs)
	locks, err := lockservice.New(lockservice.Config{Client: coord.client, Logger: cfg.Logger, Registerer: cfg.MetricsRegisterer})
	if err != nil {
		coord.close()
		return nil, fmt.Errorf("lock service: %w", err)
	}
	return &ClientServer{cfg: cfg, log: cfg.Logger, grpc: gs, health: hs, coord: coord, locks: locks, m: m}, nil
}

// Serve accepts clients on l until Stop: gRPC over HTTP/2, and the JSON
// gateway plus /health, /version, /metrics (and /debug/pprof/ if enabled)
// over HTTP/1.1, told apart by the connection's first bytes as etcd does.
func (s *ClientServer) Serve(l net.Listener) error {
	m := cmux.New(l)
	grpcL := m.Match(cmux.HTTP2())
	httpL := m.Match(cmux.HTTP1())

	gwmux, closeGW, err := s.gateway(l.Addr().String(), insecure.NewCredentials())
	if err != nil {
		return err
	}
	httpSrv := &http.Server{Handler: s.httpMux(gwmux), ReadHeaderTimeout: 30 * time.Second,
		ConnContext: lockservice.ConnContext}
	s.mu.Lock()
	s.closers = append(s.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(ctx)
		closeGW()
		m.Close()
	})
	s.mu.Unlock()

	errc := make(chan error, 3)
	go func() { errc <- s.grpc.Serve(grpcL) }()
	go func() { errc <- httpSrv.Serve(httpL) }()
	go func() { errc <- m.Serve() }()
	err = <-errc
	if errors.Is(err, cmux.ErrListenerClosed) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop drains in-flight RPCs (bounded by ctx), then closes every listener.
func (s *ClientServer) Stop(ctx context.Context) {
	// The lock service's streams hold locks through the in-process client:
	// end them (revoking their leases) while the client still works.
	s.locks.Close(ctx)
	// The lock and election services hold streams of an in-process client;
	// close it first or GracefulStop would wait for them.
	s.coord.close()
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
	}
	s.mu.Lock()
	closers := s.closers
	s.closers = nil
	s.mu.Unlock()
	for _, c := range closers {
		c()
	}
}

// gateway builds etcd's JSON gateway (/v3/...), a grpc-gateway proxy that
// dials this very listener with creds, with etcd's marshaling options.
func (s *ClientServer) gateway(addr string, creds credentials.TransportCredentials) (*gw.ServeMux, func(), error) {
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: dial %s: %w", addr, err)
	}
	gwmux := gw.NewServeMux(gw.WithMarshalerOption(gw.MIMEWildcard, &gw.HTTPBodyMarshaler{
		Marshaler: &gw.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		},
	}))
	ctx := context.Background()
	for _, register := range []func(context.Context, *gw.ServeMux, *grpc.ClientConn) error{
		etcdgw.RegisterKVHandler,
		etcdgw.RegisterClusterHandler,
		etcdgw.RegisterMaintenanceHandler,
		etcdgw.RegisterLeaseHandler,
		etcdgw.RegisterWatchHandler,
		etcdgw.RegisterAuthHandler,
		registerLockGateway,
		registerElectionGateway,
	} {
		if err := register(ctx, gwmux, conn); err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("gateway: register: %w", err)
		}
	}
	return gwmux, func() { conn.Close() }, nil
}

func (s *ClientServer) httpMux(gwmux *gw.ServeMux) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/v3/", gwmux)
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"etcdserver": EtcdServerVersion, "etcdcluster": EtcdClusterVersion})
	})
	mux.Handle(lockapi.PathPrefix, s.locks)
	mux.HandleFunc("/health", s.serveHealth)
	s.handleProbes(mux)
	mux.Handle("/metrics", s.m.handler())
	if s.cfg.EnablePprof {
		registerPprof(mux)
	}
	return mux
}

// pprofPrefix is where etcd serves the runtime profiles.
const pprofPrefix = "/debug/pprof"

// registerPprof adds the handlers etcd's debugutil.PProfHandlers serves:
// the index (which also serves every named profile, e.g. allocs), CPU
// profile, symbol lookup, command line and execution trace, and the named
// profiles etcd lists explicitly.
func registerPprof(mux *http.ServeMux) {
	mux.HandleFunc(pprofPrefix+"/", pprof.Index)
	mux.HandleFunc(pprofPrefix+"/profile", pprof.Profile)
	mux.HandleFunc(pprofPrefix+"/symbol", pprof.Symbol)
	mux.HandleFunc(pprofPrefix+"/cmdline", pprof.Cmdline)
	mux.HandleFunc(pprofPrefix+"/trace", pprof.Trace)
	for _, name := range []string{"heap", "goroutine", "threadcreate", "block", "mutex"} {
		mux.Handle(pprofPrefix+"/"+name, pprof.Handler(name))
	}
}

// healthReport is etcd's /health body.
type healthReport struct {
	Health string `json:"health"`
	Reason string `json:"reason"`
}

// check runs etcd's health checks in etcd's order: no active alarm other
// than the excluded ones (?exclude=NOSPACE), a leader exists (unless
// serializable), and a one-key read succeeds within the request timeout.
func (s *ClientServer) check(ctx context.Context, serializable bool, excluded []string) healthReport {
	for _, a := range s.cfg.Member.Alarms() {
		if slices.Contains(excluded, a.Alarm.String()) {
			continue
		}
		switch a.Alarm {
		case pb.AlarmType_NOSPACE:
			return healthReport{Health: "false", Reason: "ALARM NOSPACE"}
		case pb.AlarmType_CORRUPT:
			return healthReport{Health: "false", Reason: "ALARM CORRUPT"}
		default:
			return healthReport{Health: "false", Reason: "ALARM UNKNOWN"}
		}
	}
	if !serializable && s.cfg.Member.Status().Leader == 0 {
		return healthReport{Health: "false", Reason: "RAFT NO LEADER"}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.cfg.Member.Range(ctx, &pb.RangeRequest{Key: []byte("health"), KeysOnly: true, Limit: 1, Serializable: serializable}); err != nil {
		return healthReport{Health: "false", Reason: fmt.Sprintf("RANGE ERROR:%s", err)}
	}
	return healthReport{Health: "true"}
}

func (s *ClientServer) serveHealth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	h := s.check(r.Context(), r.URL.Query().Get("serializable") == "true", r.URL.Query()["exclude"])
	s.m.recordHealth(h.Health == "true")
	body, _ := json.Marshal(h)
	if h.Health != "true" {
		http.Error(w, string(body), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

