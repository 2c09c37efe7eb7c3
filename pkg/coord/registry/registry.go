// Package registry is the coord module's service registry on
// pkg/discovery: an instance is registered under a lease that is kept
// alive until Unregister (or until the process dies and the lease
// expires), Discover lists the live instances, Watch follows changes, and
// GetConnection dials a service through pkg/discovery's gRPC resolver,
// balancing round-robin over its instances.
//
// Instances of service S live under Prefix + S + "/" + host:port, in
// etcd's naming-record format; the record's Metadata holds the whole
// ServiceInfo.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"

	"github.com/metastore-io/metastore/pkg/coord/validation"
	"github.com/metastore-io/metastore/pkg/discovery"
)

// ErrNotRegistered is returned by Unregister for an ID this registry did
// not register.
var ErrNotRegistered = errors.New("service not registered here")

// EventType says what happened to an instance.
type EventType string

// Event types.
const (
	EventTypePut    EventType = "PUT"
	EventTypeDelete EventType = "DELETE"
)

// ServiceInfo describes one instance.
type ServiceInfo struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Address  string            `json:"address"`
	Port     int               `json:"port"`
	TTL      time.Duration     `json:"ttl"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Addr is the instance's dial address.
func (s ServiceInfo) Addr() string {
	if s.Port > 0 {
		return net.JoinHostPort(s.Address, strconv.Itoa(s.Port))
	}
	return s.Address
}

// ServiceEvent is a change to a service's instances.
type ServiceEvent struct {
	Type    EventType
	Service ServiceInfo
}

// ServiceRegistry registers and finds services.
type ServiceRegistry interface {
	Register(ctx context.Context, service ServiceInfo, ttl time.Duration) error
	Unregister(ctx context.Context, serviceID string) error
	Discover(ctx context.Context, serviceName string) ([]ServiceInfo, error)
	Watch(ctx context.Context, serviceName string) (<-chan ServiceEvent, error)
	GetConnection(ctx context.Context, serviceName string) (*grpc.ClientConn, error)
}

// ValidationError is a request refused before reaching the store.
type ValidationError = validation.Error

// Registry implements ServiceRegistry on pkg/discovery.
type Registry struct {
	prefix    string
	discovery *discovery.Registry
	resolver  resolver.Builder
	log       *slog.Logger
	retry     func(ctx context.Context, op func(ctx context.Context) error) error

	mu   sync.Mutex // guards regs
	regs map[string]*discovery.Registration
}

// New returns a registry keeping services under prefix on client. The
// prefix must not start with "/" (it becomes part of a gRPC target).
// retry runs each one-shot call (nil: once).
func New(client *clientv3.Client, prefix string, logger *slog.Logger, retry func(context.Context, func(context.Context) error) error) *Registry {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if retry == nil {
		retry = func(ctx context.Context, op func(context.Context) error) error { return op(ctx) }
	}
	return &Registry{
		prefix:    prefix,
		discovery: discovery.NewRegistry(client, logger),
		resolver:  discovery.NewResolverBuilder(client, logger),
		log:       logger,
		retry:     retry,
		regs:      map[string]*discovery.Registration{},
	}
}

func (r *Registry) service(name string) string { return r.prefix + name }

func validName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return &ValidationError{Field: "service name", Reason: fmt.Sprintf("%q is empty or has a / or NUL", name)}
	}
	return nil
}

// Register adds an instance under a lease of ttl kept alive until
// Unregister; re-registering an ID replaces the earlier registration.
func (r *Registry) Register(ctx context.Context, s ServiceInfo, ttl time.Duration) error {
	if err := validName(s.Name); err != nil {
		return err
	}
	switch {
	case s.ID == "":
		return &ValidationError{Field: "service ID", Reason: "empty"}
	case s.Address == "":
		return &ValidationError{Field: "address", Reason: "empty"}
	case ttl <= 0:
		return &ValidationError{Field: "ttl", Reason: fmt.Sprintf("%v is not positive", ttl)}
	}
	s.TTL = ttl
	var reg *discovery.Registration
	err := r.retry(ctx, func(ctx context.Context) error {
		var err error
		reg, err = r.discovery.Register(ctx, r.service(s.Name), discovery.Endpoint{Addr: s.Addr(), Metadata: s}, ttl)
		return err
	})
	if err != nil {
		return fmt.Errorf("register %s (%s): %w", s.Name, s.ID, err)
	}
	r.mu.Lock()
	prev := r.regs[s.ID]
	r.regs[s.ID] = reg
	r.mu.Unlock()
	if prev != nil && prev.Key() != reg.Key() {
		_ = prev.Unregister(ctx)
	}
	r.log.Info("service registered", "service", s.Name, "id", s.ID, "addr", s.Addr(), "ttl", ttl)
	return nil
}

// Unregister removes the instance at once.
func (r *Registry) Unregister(ctx context.Context, serviceID string) error {
	r.mu.Lock()
	reg := r.regs[serviceID]
	delete(r.regs, serviceID)
	r.mu.Unlock()
	if reg == nil {
		return fmt.Errorf("unregister %q: %w", serviceID, ErrNotRegistered)
	}
	if err := r.retry(ctx, reg.Unregister); err != nil {
		return fmt.Errorf("unregister %q: %w", serviceID, err)
	}
	r.log.Info("service unregistered", "id", serviceID, "key", reg.Key())
	return nil
}

// Close unregisters every instance registered here.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	regs := r.regs
	r.regs = map[string]*discovery.Registration{}
	r.mu.Unlock()
	var errs []error
	for _, reg := range regs {
		errs = append(errs, reg.Unregister(ctx))
	}
	return errors.Join(errs...)
}

// infoOf rebuilds the ServiceInfo of a discovered endpoint; records
// written by other tools get what the endpoint says.
func infoOf(name string, ep discovery.Endpoint) ServiceInfo {
	var s ServiceInfo
	if b, err := json.Marshal(ep.Metadata); err == nil && json.Unmarshal(b, &s) == nil && s.ID != "" {
		return s
	}
	host, port, err := net.SplitHostPort(ep.Addr)
	if err != nil {
		return ServiceInfo{ID: ep.Addr, Name: name, Address: ep.Addr}
	}
	p, _ := strconv.Atoi(port)
	return ServiceInfo{ID: ep.Addr, Name: name, Address: host, Port: p}
}

// Discover lists the live instances of serviceName.
func (r *Registry) Discover(ctx context.Context, serviceName string) ([]ServiceInfo, error) {
	if err := validName(serviceName); err != nil {
		return nil, err
	}
	var eps []discovery.Endpoint
	err := r.retry(ctx, func(ctx context.Context) error {
		var err error
		eps, err = r.discovery.Discover(ctx, r.service(serviceName))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", serviceName, err)
	}
	out := make([]ServiceInfo, 0, len(eps))
	for _, ep := range eps {
		out = append(out, infoOf(serviceName, ep))
	}
	return out, nil
}

// Watch reports every current instance as PUT, then each change, until
// ctx ends.
func (r *Registry) Watch(ctx context.Context, serviceName string) (<-chan ServiceEvent, error) {
	if err := validName(serviceName); err != nil {
		return nil, err
	}
	in, err := r.discovery.Watch(ctx, r.service(serviceName))
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", serviceName, err)
	}
	out := make(chan ServiceEvent)
	go func() {
		defer close(out)
		for ev := range in {
			typ := EventTypePut
			if ev.Type == discovery.Removed {
				typ = EventTypeDelete
			}
			select {
			case out <- ServiceEvent{Type: typ, Service: infoOf(serviceName, ev.Endpoint)}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// GetConnection returns a gRPC client connection to serviceName that
// follows its instances through the resolver and balances round-robin,
// without transport security; the caller closes the connection.
func (r *Registry) GetConnection(ctx context.Context, serviceName string) (*grpc.ClientConn, error) {
	return r.GetConnectionWith(ctx, serviceName)
}

// GetConnectionWith is GetConnection with extra dial options (TLS
// credentials, interceptors), applied after the defaults.
func (r *Registry) GetConnectionWith(ctx context.Context, serviceName string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if err := validName(serviceName); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all := append([]grpc.DialOption{
		grpc.WithResolvers(r.resolver),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	conn, err := grpc.NewClient(discovery.Scheme+":///"+r.service(serviceName), all...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", serviceName, err)
	}
	return conn, nil
}

var _ ServiceRegistry = (*Registry)(nil)
