package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/pkg/coord/config"
	"github.com/metastore-io/metastore/pkg/coord/internal/retry"
	"github.com/metastore-io/metastore/pkg/coord/lock"
	"github.com/metastore-io/metastore/pkg/coord/registry"
	"github.com/metastore-io/metastore/pkg/coord/validation"
)

// The lock errors of the design.
var (
	ErrLockExpired  = lock.ErrLockExpired
	ErrLockNotHeld  = lock.ErrLockNotHeld
	ErrLockConflict = lock.ErrLockConflict
)

// ValidationError is a request refused before reaching the store.
type ValidationError = validation.Error

// Provider is the module's entry point.
type Provider interface {
	Lock() lock.DistributedLock
	Registry() registry.ServiceRegistry
	Config() config.ConfigCenter
	Close() error
}

// CoordinatorConfig configures New.
type CoordinatorConfig struct {
	// Endpoints are the members' client addresses (host:port or URLs).
	Endpoints []string `json:"endpoints"`
	// Username and Password, for a cluster with authentication.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Timeout bounds dialing and New's connectivity check.
	Timeout time.Duration `json:"timeout"`
	// RetryConfig is the retry policy; nil means DefaultRetryConfig.
	RetryConfig *RetryConfig `json:"retry_config,omitempty"`
	// Namespace prefixes every key the module writes ("coord/").
	Namespace string `json:"namespace,omitempty"`
}

// RetryConfig is exponential backoff for transient errors.
type RetryConfig struct {
	MaxAttempts  int           `json:"max_attempts"`
	InitialDelay time.Duration `json:"initial_delay"`
	MaxDelay     time.Duration `json:"max_delay"`
	Multiplier   float64       `json:"multiplier"`
}

// DefaultNamespace is CoordinatorConfig.Namespace's default.
const DefaultNamespace = "coord/"

// DefaultRetryConfig: 3 attempts, 100 ms doubling up to 2 s.
func DefaultRetryConfig() *RetryConfig {
	return &RetryConfig{MaxAttempts: 3, InitialDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second, Multiplier: 2}
}

// DefaultConfig connects to localhost:2379.
func DefaultConfig() CoordinatorConfig {
	return CoordinatorConfig{Endpoints: []string{"localhost:2379"}, Timeout: 5 * time.Second, RetryConfig: DefaultRetryConfig()}
}

// Options are what Option sets.
type Options struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Option configures New.
type Option func(*Options)

// WithLogger sets the module's logger (records carry component=coord).
func WithLogger(logger *slog.Logger) Option {
	return func(o *Options) { o.Logger = logger }
}

// WithRegisterer registers the lock metrics with reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *Options) { o.Registerer = reg }
}

func (c CoordinatorConfig) validate() error {
	if len(c.Endpoints) == 0 {
		return &ValidationError{Field: "endpoints", Reason: "none given"}
	}
	if c.Timeout < 0 {
		return &ValidationError{Field: "timeout", Reason: "negative"}
	}
	if r := c.RetryConfig; r != nil && (r.MaxAttempts < 1 || r.InitialDelay < 0 || r.MaxDelay < 0 || r.Multiplier < 1) {
		return &ValidationError{Field: "retry_config", Reason: fmt.Sprintf("%+v: need MaxAttempts >= 1, delays >= 0, Multiplier >= 1", *r)}
	}
	return nil
}

type coordinator struct {
	client   *clientv3.Client
	log      *slog.Logger
	lock     *lock.Factory
	registry *registry.Registry
	config   *config.Center
}

// New connects to the cluster, checks it answers (with retries), and
// returns the Provider. Close releases the connection.
func New(ctx context.Context, cfg CoordinatorConfig, opts ...Option) (Provider, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.RetryConfig == nil {
		cfg.RetryConfig = DefaultRetryConfig()
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	o := Options{}
	for _, apply := range opts {
		apply(&o)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "coord")
	metrics := lock.NewMetrics()
	if o.Registerer != nil {
		if err := metrics.Register(o.Registerer); err != nil {
			return nil, fmt.Errorf("coord: metrics: %w", err)
		}
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Endpoints, DialTimeout: cfg.Timeout, Username: cfg.Username, Password: cfg.Password,
		Context: ctx, Logger: zap.NewNop(),
		MaxCallSendMsgSize: 10 << 20, MaxCallRecvMsgSize: 10 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("coord: connect: %w", err)
	}
	policy := retry.Policy(*cfg.RetryConfig)
	withRetry := func(ctx context.Context, op func(context.Context) error) error { return retry.Do(ctx, policy, op) }
	check := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		_, err := client.Get(ctx, cfg.Namespace, clientv3.WithCountOnly())
		return err
	}
	if err := withRetry(ctx, check); err != nil {
		client.Close()
		return nil, fmt.Errorf("coord: cluster at %v does not answer: %w", cfg.Endpoints, err)
	}
	log.Info("coordinator connected", "endpoints", cfg.Endpoints, "namespace", cfg.Namespace)
	return &coordinator{
		client:   client,
		log:      log,
		lock:     lock.NewFactory(client, cfg.Namespace+"locks/", log, metrics),
		registry: registry.New(client, cfg.Namespace+"services/", log, withRetry),
		config:   config.New(client, cfg.Namespace+"config/", withRetry),
	}, nil
}

func (c *coordinator) Lock() lock.DistributedLock         { return c.lock }
func (c *coordinator) Registry() registry.ServiceRegistry { return c.registry }
func (c *coordinator) Config() config.ConfigCenter        { return c.config }

// Close unregisters the services registered through it and closes the
// connection; held locks' leases stop being renewed and expire.
func (c *coordinator) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.registry.Close(ctx)
	return errors.Join(err, c.client.Close())
}
