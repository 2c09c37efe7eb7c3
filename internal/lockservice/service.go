package lockservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/lockapi"
)

// Defaults of Config.
const (
	DefaultPrefix       = "/metastore/lockservice/"
	DefaultLeaseTTL     = 5 * time.Second
	DefaultHeartbeat    = time.Second
	DefaultWriteTimeout = 10 * time.Second
	// DefaultRequestTimeout is the member's request timeout with etcd's
	// default election timeout, 1 s (membererr.RequestTimeout).
	DefaultRequestTimeout = 7 * time.Second
	// DefaultLockDelay is D, the gap kept between the moment a holder
	// must stop believing it holds and the earliest grant to anybody
	// else after a failure (docs/coordination-safety.md). It covers what
	// the holder's own deadline cannot see: the last keep-alive line's
	// time in transit and the holder's scheduling delay in acting on its
	// deadline. A second is some hundred times a loaded LAN's delay and
	// more than a stop-the-world pause of a healthy Go or JVM client,
	// while leaving a 5 s lease 3.9 s of validity per renewal, with
	// renewals every 0.5 s.
	DefaultLockDelay = time.Second
	// DefaultHeartbeatPadding is the spaces written with each keep-alive
	// of a held lock. With lockSendBuffer, a holder that stops reading
	// fills about 190 KB of buffers (Linux's default 128 KiB receive
	// buffer and the member's side) in some 12 s of 16 KiB heartbeats;
	// the write that then blocks fails after WriteTimeout: within the
	// documented 30 s. It costs 16 KiB/s per held lock on the wire.
	DefaultHeartbeatPadding = 16 << 10
	// maxBodyBytes bounds a request body; three fields of at most
	// MaxFieldBytes and an error reason fit with room to spare.
	maxBodyBytes = 64 << 10
	// cleanupTimeout bounds the revoke of a departing contender's lease;
	// past it the lease simply expires.
	cleanupTimeout = 5 * time.Second
	// retryPause spaces the re-checks of a waiter whose watch failed.
	retryPause = 100 * time.Millisecond
	// callMargin is how much longer than the member's request timeout a
	// call may take: the member's own answer, with etcd's message, then
	// arrives before the call's deadline ends it.
	callMargin = time.Second
	// renewRetry spaces the keep-alives sent while none is confirmed;
	// each has renewCallTimeout, so up to maxRenewCalls are in flight.
	renewRetry       = 300 * time.Millisecond
	renewCallTimeout = time.Second
	maxRenewCalls    = 4
	// lockSendBuffer is the send buffer of a /lock connection (the kernel
	// doubles it for its bookkeeping): small, so that a client that stops
	// reading fills it quickly (bindConnection).
	lockSendBuffer = 4 << 10
)

// renewEvery is the renewal period of a lease of ttl when all goes well:
// a tenth of it (0.5 s for 5 s). Short, because after a leader dies its
// lock leases are believed only until the last confirmed renewal's send
// plus ttl·(1−2ρ) − D (3.9 s), and the renewal answered by the new leader
// (elected 1 to 2.5 s after the death) must arrive before that: with a
// renewal at most 0.5 s old at the death and one sent every renewRetry
// meanwhile, it does with some 0.6 s to spare.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 10 }

// Config configures a Service.
type Config struct {
	// Client reaches the member's KV, Lease and Watch services (the
	// in-process client of pkg/etcdcompat). Required.
	Client *clientv3.Client
	// Prefix is where the queues live; DefaultPrefix when empty.
	Prefix string
	// LeaseTTL bounds how long a lock outlives the member serving its
	// connection (and the election, when that member led: see the
	// package doc); DefaultLeaseTTL when zero.
	LeaseTTL time.Duration
	// Heartbeat spaces the keep-alive lines of a /lock stream.
	Heartbeat time.Duration
	// WriteTimeout drops a client whose stream writes block that long,
	// and (on Linux, TCP_USER_TIMEOUT) one whose host stops acknowledging
	// them: a vanished client releases its lock within WriteTimeout plus
	// Heartbeat. It must be at least LeaseTTL, so that a client dropped
	// this way has stopped believing it holds (its validity runs out
	// sooner) at least LockDelay before the lock is released.
	WriteTimeout time.Duration
	// RequestTimeout is the member's request timeout, within which it
	// answers a call it cannot serve (no leader, no quorum); each call of
	// the service is bounded by it and callMargin.
	// DefaultRequestTimeout when zero.
	RequestTimeout time.Duration
	// LockDelay is D: a holder is told to stop believing it holds the
	// lock (its validity runs out) at least D before anybody else can be
	// granted it after a failure. DefaultLockDelay when zero; it must be
	// below LeaseTTL·(1−2ρ) less a renewal period.
	LockDelay time.Duration
	// HeartbeatPadding is how many bytes each keep-alive of a held lock
	// is padded to (DefaultHeartbeatPadding when zero, none when
	// negative): it bounds how long a holder that stops reading keeps
	// the lock.
	HeartbeatPadding int
	Logger           *slog.Logger
	// Registerer receives the metastore_lock_* metrics; nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
}

// Service serves /v1/lock/. Its handlers are safe for concurrent use.
type Service struct {
	cfg     Config
	client  *clientv3.Client
	log     *slog.Logger
	metrics *metrics

	// stopping ends every stream when the member stops; streams counts
	// the handlers still running so Close can wait for their cleanup.
	stopping context.Context
	stop     context.CancelFunc
	streams  sync.WaitGroup
}

// New returns a Service for cfg.
func New(cfg Config) (*Service, error) {
	if cfg.Client == nil {
		return nil, errors.New("lockservice: Config.Client is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.LockDelay == 0 {
		cfg.LockDelay = DefaultLockDelay
	}
	if cfg.HeartbeatPadding == 0 {
		cfg.HeartbeatPadding = DefaultHeartbeatPadding
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("lockservice: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("lockservice: metrics: %w", err)
	}
	stopping, stop := context.WithCancel(context.Background())
	return &Service{cfg: cfg, client: cfg.Client, log: cfg.Logger.With("component", "lockservice"),
		metrics: m, stopping: stopping, stop: stop}, nil
}

// validate checks the bounds hold together: a lease must leave its holder
// some validity after each renewal, and a dropped client must be out of
// validity before its lock is released.
func (cfg Config) validate() error {
	if max := MaxLockDelay(cfg.LeaseTTL); cfg.LockDelay < 0 || cfg.LockDelay >= max {
		return fmt.Errorf("lock delay %v: must be at least 0 and below %v for a %v lease (its TTL·(1−2ρ) less a renewal period)",
			cfg.LockDelay, max, cfg.LeaseTTL)
	}
	if cfg.WriteTimeout < cfg.LeaseTTL {
		return fmt.Errorf("write timeout %v: must be at least the lease TTL %v", cfg.WriteTimeout, cfg.LeaseTTL)
	}
	return nil
}

// MaxLockDelay is the lock delay a lease of ttl cannot reach: past it a
// holder would be out of validity before its next renewal.
func MaxLockDelay(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*(1-2*driftRate)) - renewEvery(ttl)
}

// Close ends every /lock stream (their leases are revoked, releasing the
// locks they held) and waits for the handlers to finish, bounded by ctx.
func (s *Service) Close(ctx context.Context) {
	s.stop()
	done := make(chan struct{})
	go func() {
		s.streams.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// ServeHTTP routes /v1/lock/lock, /unlock and /status.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case lockapi.PathLock:
		if s.allow(w, r, http.MethodPost) {
			s.serveLock(w, r)
		}
	case lockapi.PathUnlock:
		if s.allow(w, r, http.MethodPost) {
			s.serveUnlock(w, r)
		}
	case lockapi.PathStatus:
		if s.allow(w, r, http.MethodGet) {
			s.serveStatus(w, r)
		}
	default:
		s.fail(w, http.StatusNotFound, fmt.Errorf("no such lock service path %q", r.URL.Path))
	}
}

func (s *Service) allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	s.fail(w, http.StatusMethodNotAllowed, fmt.Errorf("%s needs %s", r.URL.Path, method))
	return false
}

// withCredentials passes the caller's credentials on to the member: the
// Authorization header (an auth token, as etcd's JSON gateway forwards it)
// becomes the "authorization" metadata of every call made for the request,
// so with authentication enabled the lock service needs what the gateway
// needs and acts with the caller's permissions.
func withCredentials(ctx context.Context, r *http.Request) context.Context {
	if token := r.Header.Get("Authorization"); token != "" {
		return metadata.AppendToOutgoingContext(ctx, "authorization", token)
	}
	return ctx
}

// decodeBody reads the whole body (so the server notices when the client
// goes away) and decodes it into v.
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if len(body) > maxBodyBytes {
		return fmt.Errorf("body larger than %d bytes", maxBodyBytes)
	}
	if len(body) == 0 {
		return errors.New("empty body: want a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("body is not the expected JSON object: %w", err)
	}
	return nil
}

// fail answers an error with its status and counts it.
func (s *Service) fail(w http.ResponseWriter, code int, err error) {
	s.metrics.failed.WithLabelValues(strconv.Itoa(code)).Inc()
	writeJSON(w, code, lockapi.ErrorResponse{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// call makes one call to the member, bounded by its request timeout and
// callMargin: without quorum the member answers within the former, with
// etcd's error for the call. The error comes back with the member's
// message as its text: clientv3 returns some of etcd's errors (the
// deadline of a proposal raft never took) as a bare gRPC status, whose
// text starts "rpc error: code =". A call the bound ends fails with etcd's
// ErrTimeout: a linearizable read that arrives during a ReadIndex round
// waits for the next one, up to twice the request timeout, and a member
// that hangs never answers.
func call[T any](s *Service, ctx context.Context, do func(context.Context) (T, error)) (T, error) {
	bound := s.cfg.RequestTimeout + callMargin
	callCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	resp, err := do(callCtx)
	st, isStatus := err.(interface{ GRPCStatus() *status.Status })
	switch {
	case err != nil && ctx.Err() == nil && callCtx.Err() != nil:
		err = fmt.Errorf("no answer within %v: %w", bound, rpctypes.ErrTimeout)
	case isStatus:
		err = memberError{st.GRPCStatus()}
	}
	return resp, err
}

// memberError is a gRPC status from the member, its message as its text.
type memberError struct{ st *status.Status }

func (e memberError) Error() string              { return e.st.Message() }
func (e memberError) GRPCStatus() *status.Status { return e.st }

// statusOf maps an error of the in-process client to an HTTP status: the
// cluster being unable to serve (no leader, timeouts, stopping) is 503, a
// missing or bad token 401, a permission the caller lacks 403. clientv3
// hands server errors back as rpctypes.EtcdError, which carries the gRPC
// code.
func statusOf(err error) int {
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusServiceUnavailable
	}
	if errors.Is(err, rpctypes.ErrUserEmpty) {
		return http.StatusUnauthorized
	}
	code := status.Code(err)
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		code = etcdErr.Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted, codes.Aborted:
		return http.StatusServiceUnavailable
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}
