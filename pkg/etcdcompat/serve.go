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

	"github.com/metastore-io/metastore/internal/cluster/version"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// grpcOverheadBytes is the headroom etcd adds to --max-request-bytes for the
// gRPC receive limit, so that a request just under the limit is rejected by
// our check with etcd's message rather than by gRPC's framing.
const grpcOverheadBytes = 512 * 1024

// streamWorkers is the number of goroutines gRPC keeps to run RPCs (a
// call arriving while all are busy gets a goroutine of its own, as every
// call did before). A fresh goroutine per call grew its stack, copying it,
// on every call; workers' stacks stay grown between calls (gRPC replaces
// a worker after 65,536 calls, and the garbage collector shrinks an idle
// one's). Writes hold their worker until their commit is applied, so most
// puts still run on a fresh goroutine; more workers would not help: gRPC
// hands a call to the worker that has waited longest, so with more
// workers than calls in progress every call runs on a stack the collector
// shrank since its last use, and on cold caches (docs/performance.md,
// "Measurements behind the code", has the figures that chose 256). A
// watch or keep-alive stream holds its worker for its life.
const streamWorkers = 256

// Config configures the client-facing server.
type Config struct {
	Member          Member
	MaxRequestBytes uint
	MaxTxnOps       uint
	// MaxSendBytes is the gRPC server's largest message to a client; 0
	// means etcd's, math.MaxInt32 (see SendLimit).
	MaxSendBytes int
	Logger       *slog.Logger
	// Metrics is served on /metrics; nil serves an empty registry.
	Metrics prometheus.Gatherer
	// ExtensiveMetrics is etcd's --metrics=extensive: it adds the gRPC
	// handling-time histogram (grpc_server_handling_seconds).
	ExtensiveMetrics bool
	// EnablePprof serves the Go runtime profiles under /debug/pprof/ (etcd's
	// --enable-pprof). Off by default: a CPU profile or trace costs the
	// server CPU and anyone who can reach the client port can start one.
	EnablePprof bool
	// HTTPServices are served on the client port's HTTP side beside the
	// JSON gateway, each under its path, over the member's in-process
	// client (the HTTP lock service under /v1/lock/). Stop closes them
	// first, while that client still works.
	HTTPServices []HTTPService
	// ConnContext, if set, adds what the HTTP services need of a client
	// connection to its requests' context (http.Server.ConnContext).
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// MetricsRegisterer receives the collectors of services living here:
	// etcd's client-facing series (grpc_server_*, etcd_network_client_*,
	// ...) and the HTTP lock service's; nil leaves them unregistered.
	MetricsRegisterer prometheus.Registerer

	// Listener options, etcd's defaults when zero (see Defaults).
	MaxConcurrentStreams uint32        // --max-concurrent-streams
	KeepAliveMinTime     time.Duration // --grpc-keepalive-min-time
	KeepAliveInterval    time.Duration // --grpc-keepalive-interval
	KeepAliveTimeout     time.Duration // --grpc-keepalive-timeout
	// DisableGateway turns off the JSON gateway (/v3/...), as
	// --enable-grpc-gateway=false does.
	DisableGateway bool
	// CORS and HostWhitelist are etcd's --cors and --host-whitelist: empty
	// or containing "*" allows every origin / host.
	CORS          []string
	HostWhitelist []string
	// GatewayTarget is the gRPC target the JSON gateway dials (a listener
	// that serves gRPC), with GatewayCreds (nil: plaintext); empty means
	// the listener the request came in on.
	GatewayTarget string
	GatewayCreds  credentials.TransportCredentials
}

// ListenerKind says what a client listener serves.
type ListenerKind int

const (
	// ServeGRPCAndHTTP is a --listen-client-urls listener without
	// --listen-client-http-urls: gRPC and HTTP told apart per connection.
	ServeGRPCAndHTTP ListenerKind = iota
	// ServeGRPCOnly is a --listen-client-urls listener once
	// --listen-client-http-urls is given.
	ServeGRPCOnly
	// ServeHTTPOnly is a --listen-client-http-urls listener: the gateway,
	// /health, /version, /metrics (and pprof), no gRPC.
	ServeHTTPOnly
)

// ClientServer serves etcd's client protocol (gRPC, JSON gateway, HTTP
// endpoints) on one or more listeners.
type ClientServer struct {
	cfg    Config
	log    *slog.Logger
	grpc   *grpc.Server
	health *health.Server
	coord  *coordination // etcd's v3lock and v3election services
	// services are cfg.HTTPServices built, on coord's client.
	services []builtService
	m        *clientMetrics

	mu      sync.Mutex
	closers []func()
	stopped bool // Stop has begun
}

// NewClientServer builds the gRPC server with etcd's services registered.
func NewClientServer(cfg Config) (*ClientServer, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newClientMetrics(cfg.MetricsRegisterer, cfg.Metrics, cfg.ExtensiveMetrics, cfg.Member)
	if err != nil {
		return nil, err
	}
	guard := leaderGuard{srv: cfg.Member, metrics: m}
	stream := []grpc.StreamServerInterceptor{m.grpc.stream, guard.stream}
	am, withAuth := cfg.Member.(AuthMember)
	if withAuth {
		guard.next = authGuard{srv: am}.unary
		stream = append(stream, authGuard{srv: am}.stream)
	}
	unary := []grpc.UnaryServerInterceptor{m.grpc.unary, guard.unary}
	gs := grpc.NewServer(cfg.grpcOptions(m, unary, stream)...)
	hdr := headerFiller{srv: cfg.Member}
	gs.RegisterService(kvServiceDesc(), &kvService{srv: cfg.Member, hdr: hdr, maxTxnOps: int(cfg.MaxTxnOps), chunkBytes: cfg.streamChunkBytes()})
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
	m.grpc.initialize(gs)
	coord, err := newCoordination(cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("lock and election services: %w", err)
	}
	coord.register(gs)
	coord.serve(gs)
	services, err := buildServices(cfg.HTTPServices, coord.client)
	if err != nil {
		coord.close()
		return nil, err
	}
	return &ClientServer{cfg: cfg, log: cfg.Logger, grpc: gs, health: hs, coord: coord, services: services, m: m}, nil
}

// SendLimit is the gRPC server's largest message to a client: MaxSendBytes,
// or etcd's math.MaxInt32 when it is 0. The store refuses a read whose
// response would be larger before building it (see kvstore's
// ResponseTooLargeError), with the status gRPC gives etcd's oversized
// responses.
func (cfg Config) SendLimit() int {
	if cfg.MaxSendBytes <= 0 {
		return math.MaxInt32
	}
	return cfg.MaxSendBytes
}

// streamChunkBytes is the target size of a RangeStream chunk's key-values:
// --max-request-bytes, the size of the largest value a client can write
// (so a chunk holds at least one), within the send limit.
func (cfg Config) streamChunkBytes() int {
	n := int(cfg.MaxRequestBytes)
	if n <= 0 {
		n = kvstore.DefaultStreamChunkBytes
	}
	return min(n, cfg.SendLimit()-kvstore.ResponseOverheadBytes)
}

// grpcOptions are etcd's server options: the receive limit, the stream
// limit and keepalive policy from the flags (0 disables a keepalive part, as
// in etcd), and the interceptors (metrics first, then the guards).
func (cfg Config) grpcOptions(m *clientMetrics, unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) []grpc.ServerOption {
	streams := cfg.MaxConcurrentStreams
	if streams == 0 {
		streams = math.MaxUint32
	}
	opts := append(m.serverOptions(),
		grpc.MaxRecvMsgSize(int(cfg.MaxRequestBytes)+grpcOverheadBytes),
		grpc.MaxSendMsgSize(cfg.SendLimit()),
		grpc.MaxConcurrentStreams(streams),
		// Connections come decrypted from the listener; the credentials
		// only report the client's TLS state (serve_tls.go).
		grpc.Creds(tlsAwareCreds{}),
		// The metrics interceptors come first, as in etcd, so that
		// requests the guards refuse are counted too.
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.NumStreamWorkers(streamWorkers),
	)
	if cfg.KeepAliveMinTime > 0 {
		opts = append(opts, grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepAliveMinTime, PermitWithoutStream: false}))
	}
	if cfg.KeepAliveInterval > 0 && cfg.KeepAliveTimeout > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepAliveInterval, Timeout: cfg.KeepAliveTimeout}))
	}
	return opts
}

// Serve accepts clients on l until Stop, as a --listen-client-urls
// listener: gRPC over HTTP/2, and the JSON gateway plus /health, /version,
// /metrics (and /debug/pprof/ if enabled) over HTTP/1.1, told apart by the
// connection's first bytes as etcd does.
func (s *ClientServer) Serve(l net.Listener) error {
	return s.ServeKind(l, ServeGRPCAndHTTP)
}

// ServeKind accepts clients on l until Stop, serving what kind says.
func (s *ClientServer) ServeKind(l net.Listener, kind ListenerKind) error {
	m := cmux.New(l)
	var grpcL, httpL net.Listener
	if kind != ServeHTTPOnly {
		grpcL = m.Match(cmux.HTTP2())
	}
	if kind != ServeGRPCOnly {
		httpL = m.Match(cmux.HTTP1())
	}
	// Anything else (HTTP/2 on an HTTP-only listener, HTTP/1 on a
	// gRPC-only one) is accepted and closed, as etcd's listeners do.
	rest := m.Match(cmux.Any())

	var httpSrv *http.Server
	closeGW := func() {}
	if httpL != nil {
		target, creds := s.cfg.GatewayTarget, s.cfg.GatewayCreds
		if target == "" {
			target, creds = DialTarget(l.Addr()), nil
		}
		if creds == nil {
			creds = insecure.NewCredentials()
		}
		h, closeFn, err := s.httpHandler(target, creds)
		if err != nil {
			return err
		}
		closeGW = closeFn
		httpSrv = &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ConnContext: s.cfg.ConnContext}
	}
	closeAll := s.addCloser(func() {
		if httpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = httpSrv.Shutdown(ctx)
		}
		closeGW()
		m.Close()
	})
	if closeAll == nil {
		return nil // stopped already
	}

	errc := make(chan error, 4)
	running := 2
	if grpcL != nil {
		running++
		go func() { errc <- s.grpc.Serve(grpcL) }()
	}
	if httpL != nil {
		running++
		go func() { errc <- httpSrv.Serve(httpL) }()
	}
	go func() { errc <- discard(rest) }()
	go func() { errc <- m.Serve() }()
	if err := waitServing(errc, running, closeAll); !isServingEnd(err) {
		return err
	}
	return nil
}

// isServingEnd reports whether err is how a server on a listener ends when
// the listener closes: no failure.
func isServingEnd(err error) bool {
	return err == nil || errors.Is(err, cmux.ErrListenerClosed) || errors.Is(err, cmux.ErrServerClosed) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped)
}

// addCloser registers what closes one listener's servers for Stop and
// returns it, run at most once; nil, having run it, once Stop has begun
// (a Serve that starts after Stop serves nothing).
func (s *ClientServer) addCloser(c func()) func() {
	c = sync.OnceFunc(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		c()
		return nil
	}
	s.closers = append(s.closers, c)
	return c
}

// waitServing waits for the first of running goroutines serving one
// listener to end, closes the listener's servers so that the others end
// too, and returns once all have, with the first failure among their
// errors (isServingEnd: the first error at all when none failed): a Serve
// leaves nothing running. The order they end in says nothing: when Stop
// closes the listener, the mux's matchers may report "mux: server closed"
// before the mux reports the closed listener.
func waitServing(errc <-chan error, running int, closeAll func()) error {
	err := <-errc
	closeAll()
	for range running - 1 {
		if e := <-errc; isServingEnd(err) && !isServingEnd(e) {
			err = e
		}
	}
	return err
}

// Stop drains in-flight RPCs (bounded by ctx), then closes every listener.
func (s *ClientServer) Stop(ctx context.Context) {
	// The HTTP services' streams (the lock service's) hold locks through
	// the in-process client: end them (revoking their leases) while the
	// client still works.
	for _, svc := range s.services {
		svc.Close(ctx)
	}
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
	s.closers, s.stopped = nil, true
	s.mu.Unlock()
	for _, c := range closers {
		c()
	}
}

// discard closes every connection l accepts until l is closed.
func discard(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		c.Close()
	}
}

// DialTarget is the gRPC target that reaches a listener's address.
func DialTarget(a net.Addr) string {
	if a.Network() == "unix" {
		return "unix:" + a.String()
	}
	return "passthrough:///" + a.String()
}

// httpHandler is what an HTTP client listener serves: the endpoints, the
// gateway unless disabled, behind etcd's host whitelist and CORS headers.
func (s *ClientServer) httpHandler(target string, creds credentials.TransportCredentials) (http.Handler, func(), error) {
	var gwmux *gw.ServeMux
	closeGW := func() {}
	if !s.cfg.DisableGateway {
		var err error
		if gwmux, closeGW, err = s.gateway(target, creds); err != nil {
			return nil, nil, err
		}
	}
	return newAccessController(s.httpMux(gwmux), s.cfg.CORS, s.cfg.HostWhitelist, s.log), closeGW, nil
}

// ServeMetrics serves a --listen-metrics-urls listener until Stop: plain
// HTTP with /metrics, /health, /livez and /readyz only, as etcd does.
func (s *ClientServer) ServeMetrics(l net.Listener) error {
	mux := http.NewServeMux()
	s.handleObservability(mux)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	closeAll := s.addCloser(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		l.Close()
	})
	if closeAll == nil {
		return nil // stopped already
	}
	err := hs.Serve(l)
	closeAll()
	if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// gateway builds etcd's JSON gateway (/v3/...), a grpc-gateway proxy that
// dials a gRPC listener of this server with creds, with etcd's marshaling
// options.
func (s *ClientServer) gateway(target string, creds credentials.TransportCredentials) (*gw.ServeMux, func(), error) {
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: dial %s: %w", target, err)
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
	if gwmux != nil {
		var gateway http.Handler = gwmux
		if am, ok := s.cfg.Member.(AuthMember); ok {
			gateway = refuseGatewayCN(am, gateway)
		}
		mux.Handle("/v3/", gateway)
	}
	mux.HandleFunc(version.VersionsPath, func(w http.ResponseWriter, r *http.Request) {
		version.ServeVersions(w, r, version.Versions{Server: EtcdServerVersion, Cluster: clusterVersionOf(s.cfg.Member), Storage: storageVersionOf(s.cfg.Member)})
	})
	for _, svc := range s.services {
		mux.Handle(svc.path, svc)
	}
	mux.HandleFunc(debugVarsPath, s.serveDebugVars)
	s.handleObservability(mux)
	if s.cfg.EnablePprof {
		registerPprof(mux)
	}
	return mux
}

// handleObservability adds /health, /livez, /readyz and /metrics.
func (s *ClientServer) handleObservability(mux *http.ServeMux) {
	mux.HandleFunc("/health", s.serveHealth)
	s.handleProbes(mux)
	mux.Handle("/metrics", s.m.handler())
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
