package member

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/lockservice"
	"github.com/metastore-io/metastore/internal/server"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
	"github.com/metastore-io/metastore/pkg/lockapi"
)

// drainTimeout bounds how long a graceful stop waits for in-flight client
// RPCs.
const drainTimeout = 10 * time.Second

// ServerConfig is the member runtime's configuration, as the entry
// points (cmd/metastore from its flags, pkg/embed from its Config) fill
// it: they reach the runtime only through this package.
type ServerConfig = server.Config

// Config is a whole member's configuration.
type Config struct {
	// Server is the runtime's. Its ClusterVersion, ServerVersion,
	// SendLimit and BeforeStop are set here, from Client.
	Server ServerConfig
	// Client is etcd's client services'. Its Member is the server;
	// the HTTP lock service is added to its HTTPServices.
	Client etcdcompat.Config
	// ClientListeners are served the client API once the member is
	// ready. The member owns them from Start on, also when Start fails.
	ClientListeners []ClientListener
	// LockDelay is the HTTP lock service's lock delay
	// (--lock-service-lock-delay; lockservice.Config.LockDelay, its
	// default when zero).
	LockDelay time.Duration
}

// ClientListener is one client listener and how the client services
// serve it until they stop: one of etcdcompat.ClientServer's Serve
// methods (ServeKind, ServeTLS, ServeMetrics); nil means Serve.
type ClientListener struct {
	Listener net.Listener
	Serve    func(clients *etcdcompat.ClientServer, l net.Listener) error
}

// Member is a running member: the runtime and the client services over
// it.
//
// Lock order: mu is a leaf; it guards clients and stopping against the
// server's BeforeStop callback, which may run (on the server's own
// goroutine) while Start is still building the client services.
type Member struct {
	cfg Config
	srv *server.Server

	mu       sync.Mutex
	clients  *etcdcompat.ClientServer // nil without client listeners
	stopping bool                     // stopClients has begun
	stopc    chan struct{}            // closed by stopClients
	serving  sync.WaitGroup           // serveClients and one goroutine per listener
}

// Start starts a member: the server (see server.New: it opens the Raft
// log, recovers, serves peers) and etcd's client services over it,
// served on the client listeners once the member is ready. ctx bounds
// the start.
func Start(ctx context.Context, cfg Config) (*Member, error) {
	m := &Member{cfg: cfg, stopc: make(chan struct{})}
	scfg := cfg.Server
	scfg.ClusterVersion = etcdcompat.EtcdClusterVersion
	scfg.ServerVersion = etcdcompat.EtcdServerVersion
	scfg.SendLimit = cfg.Client.SendLimit()
	scfg.BeforeStop = m.stopClients
	srv, err := server.New(ctx, scfg)
	if err != nil {
		closeListeners(cfg.ClientListeners)
		return nil, err
	}
	m.srv = srv
	if len(cfg.ClientListeners) == 0 {
		return m, nil
	}
	clients, err := etcdcompat.NewClientServer(m.clientConfig())
	if err != nil {
		closeListeners(cfg.ClientListeners)
		srv.Stop()
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		// The member stopped on its own while the services were built.
		closeListeners(cfg.ClientListeners)
		clients.Stop(context.Background())
		return m, nil
	}
	m.clients = clients
	m.serving.Add(1)
	go m.serveClients()
	return m, nil
}

// clientConfig is the client services' configuration over the server.
func (m *Member) clientConfig() etcdcompat.Config {
	ccfg := m.cfg.Client
	ccfg.Member = clientMember{m.srv}
	ccfg.HTTPServices = append(append([]etcdcompat.HTTPService(nil), ccfg.HTTPServices...), m.lockService())
	next := ccfg.ConnContext
	ccfg.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if next != nil {
			ctx = next(ctx, c)
		}
		return lockservice.ConnContext(ctx, c)
	}
	return ccfg
}

// lockService is the HTTP lock service, built over the client services'
// in-process client.
func (m *Member) lockService() etcdcompat.HTTPService {
	return etcdcompat.HTTPService{Path: lockapi.PathPrefix, Build: func(local *clientv3.Client) (etcdcompat.HTTPHandler, error) {
		svc, err := lockservice.New(lockservice.Config{Client: local, LockDelay: m.cfg.LockDelay,
			Logger: m.cfg.Client.Logger, Registerer: m.cfg.Client.MetricsRegisterer,
			RequestTimeout: membererr.RequestTimeout(m.srv.ElectionTimeout())})
		if err != nil {
			return nil, fmt.Errorf("lock service: %w", err)
		}
		return svc, nil
	}}
}

// serveClients serves the client API on every client listener once the
// member is ready (published), until the client services stop. A
// listener that cannot be served stops the member.
func (m *Member) serveClients() {
	defer m.serving.Done()
	select {
	case <-m.srv.Ready():
	case <-m.stopc:
		closeListeners(m.cfg.ClientListeners)
		return
	}
	for _, cl := range m.cfg.ClientListeners {
		serve := cl.Serve
		if serve == nil {
			serve = (*etcdcompat.ClientServer).Serve
		}
		m.serving.Add(1)
		go func() {
			defer m.serving.Done()
			if err := serve(m.clients, cl.Listener); err != nil {
				m.srv.Fail("serve clients", err)
			}
		}()
	}
}

// stopClients drains the client services and closes their listeners:
// the server's BeforeStop, called once when the member begins to stop.
func (m *Member) stopClients() {
	m.mu.Lock()
	m.stopping = true
	close(m.stopc)
	clients := m.clients
	m.mu.Unlock()
	if clients == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	clients.Stop(ctx)
	m.serving.Wait()
}

func closeListeners(ls []ClientListener) {
	for _, cl := range ls {
		cl.Listener.Close()
	}
}

// Server is the member's runtime.
func (m *Member) Server() *server.Server { return m.srv }

// Ready is closed once the member is published and serves clients.
func (m *Member) Ready() <-chan struct{} { return m.srv.Ready() }

// Done is closed once the member has stopped, by Stop or on its own.
func (m *Member) Done() <-chan struct{} { return m.srv.Done() }

// Err is why the member stopped on its own (server.Server.Err).
func (m *Member) Err() error { return m.srv.Err() }

// Stop stops the member gracefully: client services first, then the
// runtime (server.Server.Stop). It is safe to call more than once.
func (m *Member) Stop() { m.srv.Stop() }
