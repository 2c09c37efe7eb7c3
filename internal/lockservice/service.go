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
	// maxBodyBytes bounds a request body; three fields of at most
	// MaxFieldBytes and an error reason fit with room to spare.
	maxBodyBytes = 64 << 10
	// cleanupTimeout bounds the revoke of a departing contender's lease;
	// past it the lease simply expires.
	cleanupTimeout = 5 * time.Second
	// retryPause spaces the re-checks of a waiter whose watch failed.
	retryPause = 100 * time.Millisecond
)

// Config configures a Service.
type Config struct {
	// Client reaches the member's KV, Lease and Watch services (the
	// in-process client of pkg/etcdcompat). Required.
	Client *clientv3.Client
	// Prefix is where the queues live; DefaultPrefix when empty.
	Prefix string
	// LeaseTTL bounds how long a lock outlives the member serving its
	// connection; DefaultLeaseTTL when zero.
	LeaseTTL time.Duration
	// Heartbeat spaces the keep-alive lines of a /lock stream.
	Heartbeat time.Duration
	// WriteTimeout drops a client whose stream writes block that long,
	// and (on Linux, TCP_USER_TIMEOUT) one whose host stops acknowledging
	// them: a vanished client releases its lock within it.
	WriteTimeout time.Duration
	Logger       *slog.Logger
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
