package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"

	"github.com/metastore-io/metastore/pkg/internal/pause"
)

// Scheme is the URL scheme of the resolver: "metastore:///<service>".
const Scheme = "metastore"

// roundRobinConfig spreads calls over every live instance; without it gRPC
// would pick the first address and stay there.
const roundRobinConfig = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// ResolverOption configures NewResolverBuilder.
type ResolverOption func(*resolverBuilder)

// WithChannelBalancing leaves the load-balancing policy to the channel
// (grpc.WithDefaultServiceConfig) instead of asking for round_robin.
func WithChannelBalancing() ResolverOption {
	return func(b *resolverBuilder) { b.roundRobin = false }
}

// NewResolverBuilder returns a gRPC resolver for "metastore:///<service>"
// targets that follows the service's registered instances. Pass it to
// grpc.NewClient with grpc.WithResolvers (or resolver.Register it once at
// start-up). Calls are balanced round-robin over the live instances unless
// WithChannelBalancing is given. logger may be nil.
func NewResolverBuilder(client *clientv3.Client, logger *slog.Logger, opts ...ResolverOption) resolver.Builder {
	b := &resolverBuilder{registry: NewRegistry(client, logger), roundRobin: true}
	for _, apply := range opts {
		apply(b)
	}
	return b
}

type resolverBuilder struct {
	registry   *Registry
	roundRobin bool
}

func (b *resolverBuilder) Scheme() string { return Scheme }

// Build starts following the target's service in the background: it never
// blocks on the store, so a channel can be created while MetaStore is
// unreachable and starts working when it comes back.
func (b *resolverBuilder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	// Endpoint strips the one "/" that separates the empty authority from
	// the path, so "metastore:////svc" names the service "/svc", as etcd's
	// resolver reads it.
	service := target.Endpoint()
	if err := validateService(service); err != nil {
		return nil, fmt.Errorf("%s resolver: target %q: %w", Scheme, target.URL.String(), err)
	}
	var config *serviceconfig.ParseResult
	if b.roundRobin {
		config = cc.ParseServiceConfig(roundRobinConfig)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &serviceResolver{cancel: cancel}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		r.run(ctx, b.registry, service, cc, config)
	}()
	return r, nil
}

// serviceResolver feeds one channel with the instances of one service.
type serviceResolver struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func (r *serviceResolver) run(ctx context.Context, registry *Registry, service string, cc resolver.ClientConn, config *serviceconfig.ParseResult) {
	update := func(_ []Event, all map[string]Endpoint) bool {
		state := resolver.State{Endpoints: grpcEndpoints(all), ServiceConfig: config}
		if err := cc.UpdateState(state); err != nil {
			// Usually "no addresses" while the service has no instance;
			// the next update fixes it.
			registry.log.Debug("resolver update rejected", "service", service, "error", err)
		}
		return true
	}
	report := func(err error) { cc.ReportError(fmt.Errorf("%s resolver for %q: %w", Scheme, service, err)) }

	// The first list is retried like any later one: the resolver must not
	// give up while the store is unreachable.
	for {
		known, rev, err := registry.list(ctx, service)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			update(nil, known)
			registry.follow(ctx, service, known, rev, update, report)
			return
		}
		report(err)
		if !pause.For(ctx, resyncPause) {
			return
		}
	}
}

// ResolveNow is a no-op: the resolver is driven by the watch.
func (r *serviceResolver) ResolveNow(resolver.ResolveNowOptions) {}

// Close stops following the service and waits for the goroutine to end.
func (r *serviceResolver) Close() {
	r.cancel()
	r.done.Wait()
}

// grpcEndpoints converts instances to resolver endpoints in key order, so
// equal sets produce equal states.
func grpcEndpoints(all map[string]Endpoint) []resolver.Endpoint {
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	eps := make([]resolver.Endpoint, len(keys))
	for i, k := range keys {
		eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: all[k].Addr}}}
	}
	return eps
}
