package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// reregisterBackoff is the first pause before registering again after
	// the lease was lost; it doubles up to the TTL.
	reregisterBackoff = 100 * time.Millisecond
	// unregisterTimeout bounds the revoke when a registration is stopped
	// by context rather than by Unregister.
	unregisterTimeout = 5 * time.Second
)

// Endpoint is one instance of a service. It marshals as etcd's naming
// record; Metadata is any JSON-encodable value.
type Endpoint struct {
	Addr     string
	Metadata any
}

// record is the stored value: etcd's naming/endpoints/internal.Update,
// where Op 0 means "add" (a removal is a key deletion).
type record struct {
	Op       uint8
	Addr     string
	Metadata any
}

// decodeEndpoint parses a stored value.
func decodeEndpoint(value []byte) (Endpoint, error) {
	var r record
	if err := json.Unmarshal(value, &r); err != nil {
		return Endpoint{}, fmt.Errorf("decode endpoint record: %w", err)
	}
	if r.Addr == "" {
		return Endpoint{}, errors.New("decode endpoint record: empty Addr")
	}
	return Endpoint{Addr: r.Addr, Metadata: r.Metadata}, nil
}

func encodeEndpoint(ep Endpoint) (string, error) {
	b, err := json.Marshal(record{Addr: ep.Addr, Metadata: ep.Metadata})
	if err != nil {
		return "", fmt.Errorf("encode endpoint record: %w", err)
	}
	return string(b), nil
}

// Registry registers, lists and watches service instances.
type Registry struct {
	client *clientv3.Client
	log    *slog.Logger
}

// NewRegistry returns a registry on client. logger receives lease losses
// and undecodable records; nil discards them.
func NewRegistry(client *clientv3.Client, logger *slog.Logger) *Registry {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Registry{client: client, log: logger}
}

// servicePrefix is the key prefix of a service's instances.
func servicePrefix(service string) string { return service + "/" }

func validateService(service string) error {
	if service == "" || strings.HasSuffix(service, "/") {
		return fmt.Errorf("discovery: invalid service name %q", service)
	}
	return nil
}

// Registration is a registered instance, kept alive until Unregister.
type Registration struct {
	registry *Registry
	service  string
	key      string
	value    string
	ttl      int64

	mu    sync.Mutex
	lease clientv3.LeaseID

	stop    context.CancelFunc
	stopped chan struct{}
}

// Register adds ep as an instance of service under a lease with the given
// TTL (rounded up to whole seconds) and keeps it alive in the background:
// if the lease is lost, the instance registers again. It returns once the
// instance is visible.
func (r *Registry) Register(ctx context.Context, service string, ep Endpoint, ttl time.Duration) (*Registration, error) {
	if err := validateService(service); err != nil {
		return nil, err
	}
	if ep.Addr == "" {
		return nil, errors.New("discovery: endpoint address is empty")
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("discovery: TTL %v must be positive", ttl)
	}
	value, err := encodeEndpoint(ep)
	if err != nil {
		return nil, err
	}
	g := &Registration{
		registry: r,
		service:  service,
		key:      servicePrefix(service) + ep.Addr,
		value:    value,
		ttl:      int64(math.Ceil(ttl.Seconds())),
		stopped:  make(chan struct{}),
	}
	runCtx, stop := context.WithCancel(context.Background())
	g.stop = stop
	keepAlive, err := g.register(ctx, runCtx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("register %s: %w", g.key, err)
	}
	go g.keep(runCtx, keepAlive)
	return g, nil
}

// register grants a lease, writes the key under it and starts renewing it
// (renewal lasts as long as runCtx).
func (g *Registration) register(ctx, runCtx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	client := g.registry.client
	grant, err := client.Grant(ctx, g.ttl)
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	if _, err := client.Put(ctx, g.key, g.value, clientv3.WithLease(grant.ID)); err != nil {
		g.registry.revoke(grant.ID)
		return nil, fmt.Errorf("put: %w", err)
	}
	keepAlive, err := client.KeepAlive(runCtx, grant.ID)
	if err != nil {
		g.registry.revoke(grant.ID)
		return nil, fmt.Errorf("keep lease alive: %w", err)
	}
	g.mu.Lock()
	g.lease = grant.ID
	g.mu.Unlock()
	return keepAlive, nil
}

// keep drains renewals; when the lease is lost it registers again with
// growing pauses, until runCtx ends.
func (g *Registration) keep(runCtx context.Context, keepAlive <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(g.stopped)
	for {
		for range keepAlive {
		}
		if runCtx.Err() != nil || g.registry.client.Ctx().Err() != nil {
			return // unregistered, or the client was closed
		}
		g.registry.log.Warn("registration lost its lease, registering again", "key", g.key)
		pause := reregisterBackoff
		for {
			timer := time.NewTimer(pause)
			select {
			case <-runCtx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			ctx, cancel := context.WithTimeout(runCtx, time.Duration(g.ttl)*time.Second)
			ka, err := g.register(ctx, runCtx)
			cancel()
			if err == nil {
				keepAlive = ka
				break
			}
			if runCtx.Err() != nil || g.registry.client.Ctx().Err() != nil {
				return
			}
			g.registry.log.Warn("register again failed", "key", g.key, "error", err)
			pause = min(2*pause, time.Duration(g.ttl)*time.Second)
		}
	}
}

// Key is the instance's key.
func (g *Registration) Key() string { return g.key }

// Lease is the lease currently keeping the instance registered.
func (g *Registration) Lease() clientv3.LeaseID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lease
}

// Unregister stops renewal and revokes the lease, which removes the
// instance at once. Calling it again is a no-op.
func (g *Registration) Unregister(ctx context.Context) error {
	g.stop()
	<-g.stopped
	lease := g.Lease()
	if lease == clientv3.NoLease {
		return nil
	}
	_, err := g.registry.client.Revoke(ctx, lease)
	g.mu.Lock()
	g.lease = clientv3.NoLease
	g.mu.Unlock()
	if err != nil {
		return fmt.Errorf("unregister %s: %w", g.key, err)
	}
	return nil
}

// revoke drops a lease whose registration failed half-way; if the revoke
// fails the lease simply expires.
func (r *Registry) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), unregisterTimeout)
	defer cancel()
	if _, err := r.client.Revoke(ctx, id); err != nil {
		r.log.Debug("revoke failed; the lease will expire", "lease", fmt.Sprintf("%x", int64(id)), "error", err)
	}
}

// Deregister removes the instance at addr of service, whoever registered
// it (an operator removing a stuck instance, for example).
func (r *Registry) Deregister(ctx context.Context, service, addr string) error {
	if err := validateService(service); err != nil {
		return err
	}
	if _, err := r.client.Delete(ctx, servicePrefix(service)+addr); err != nil {
		return fmt.Errorf("deregister %s/%s: %w", service, addr, err)
	}
	return nil
}

// Discover lists the registered instances of service, ordered by key.
func (r *Registry) Discover(ctx context.Context, service string) ([]Endpoint, error) {
	if err := validateService(service); err != nil {
		return nil, err
	}
	instances, _, err := r.list(ctx, service)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(instances))
	for k := range instances {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Endpoint, len(keys))
	for i, k := range keys {
		out[i] = instances[k]
	}
	return out, nil
}

// list reads every instance of service by key, and the revision read at.
func (r *Registry) list(ctx context.Context, service string) (map[string]Endpoint, int64, error) {
	resp, err := r.client.Get(ctx, servicePrefix(service), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", service, err)
	}
	instances := make(map[string]Endpoint, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		ep, err := decodeEndpoint(kv.Value)
		if err != nil {
			r.log.Warn("skipping undecodable instance record", "key", string(kv.Key), "error", err)
			continue
		}
		instances[string(kv.Key)] = ep
	}
	return instances, resp.Header.Revision, nil
}
