package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/membership"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/internal/rocksdb"
	"github.com/metastore-io/metastore/internal/server"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// drainTimeout bounds how long Close waits for client RPCs in flight.
const drainTimeout = 10 * time.Second

// Member is a running member. Lock order: mu is a leaf lock.
type Member struct {
	cfg        Config
	log        *slog.Logger
	srv        *server.Server
	clientURLs []string
	peers      []*http.Server
	clientLs   []net.Listener
	metrics    *prometheus.Registry // the member's series, served on /metrics

	readyc   chan struct{} // closed once clients are served
	errc     chan error    // one error from the member stopping on its own; closed once stopped
	closing  chan struct{} // closed by Close
	served   chan struct{} // closed when serveWhenReady has returned
	stopped  chan struct{} // closed once everything has stopped
	stopOnce sync.Once

	mu      sync.Mutex
	clients *etcdcompat.ClientServer // nil until ready
}

// StartMember starts a member from cfg (which it copies): it binds the
// listeners, opens the data dir and the storage engine, starts Raft and
// serves peers. Clients are served once ReadyNotify is closed.
func StartMember(cfg *Config) (m *Member, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := *cfg
	c.StorageEngine = cmpOr(c.StorageEngine, "memory")
	c.ClusterState = cmpOr(c.ClusterState, ClusterStateNew)
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var listeners []net.Listener
	defer func() {
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
		}
	}()
	listen := func(us []url.URL) ([]net.Listener, error) {
		var out []net.Listener
		for _, u := range us {
			l, err := net.Listen("tcp", u.Host)
			if err != nil {
				return nil, fmt.Errorf("embed: listen on %s: %w", u.String(), err)
			}
			listeners = append(listeners, l)
			out = append(out, l)
		}
		return out, nil
	}
	peerLs, err := listen(c.ListenPeerUrls)
	if err != nil {
		return nil, err
	}
	clientLs, err := listen(c.ListenClientUrls)
	if err != nil {
		return nil, err
	}
	c.AdvertisePeerUrls = boundURLs(cmpOrURLs(c.AdvertisePeerUrls, c.ListenPeerUrls), peerLs)
	c.AdvertiseClientUrls = boundURLs(cmpOrURLs(c.AdvertiseClientUrls, c.ListenClientUrls), clientLs)
	if c.InitialCluster == "" {
		var peers []string
		for _, u := range c.AdvertisePeerUrls {
			peers = append(peers, c.Name+"="+u.String())
		}
		c.InitialCluster = strings.Join(peers, ",")
	}
	initial, err := membership.ParseInitialCluster(c.InitialCluster)
	if err != nil {
		return nil, fmt.Errorf("embed: InitialCluster: %w", err)
	}
	backend, err := openBackend(&c)
	if err != nil {
		return nil, err
	}
	// A registry of its own: several members may run in one process.
	metrics := prometheus.NewRegistry()
	srv, err := server.New(server.Config{
		Metrics:             metrics,
		Name:                c.Name,
		DataDir:             c.dataDir(),
		InitialCluster:      initial,
		InitialClusterToken: c.InitialClusterToken,
		NewCluster:          c.ClusterState == ClusterStateNew,
		PeerURLs:            urlStrings(c.AdvertisePeerUrls),
		ClientURLs:          urlStrings(c.AdvertiseClientUrls),
		SnapshotCount:       c.SnapshotCount,
		MaxRequestBytes:     c.MaxRequestBytes,
		MaxTxnOps:           c.MaxTxnOps,
		TickInterval:        c.tick(),
		ElectionTicks:       int(c.ElectionMs / c.TickMs),
		StrictReconfigCheck: true,
		Backend:             backend,
		Logger:              logger,
	})
	if err != nil {
		backend.Close()
		return nil, fmt.Errorf("embed: start member: %w", err)
	}
	m = &Member{
		cfg:        c,
		log:        logger,
		srv:        srv,
		clientURLs: urlStrings(boundURLs(c.ListenClientUrls, clientLs)),
		clientLs:   clientLs,
		metrics:    metrics,
		readyc:     make(chan struct{}),
		errc:       make(chan error, 1),
		closing:    make(chan struct{}),
		served:     make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	listeners = nil // owned by the member from here on
	for _, l := range peerLs {
		hs := &http.Server{Handler: srv.PeerHandler(), ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		srv.ConfigurePeerServer(hs)
		m.peers = append(m.peers, hs)
		go m.serve(func() error { return hs.Serve(l) }, "peers")
	}
	go m.serveWhenReady()
	go m.watchStop()
	return m, nil
}

// openBackend opens the storage engine where the metastore command keeps
// it, so a data dir moves between the two.
func openBackend(c *Config) (kvstore.Backend, error) {
	if c.StorageEngine == "memory" {
		return memory.New(), nil
	}
	dir := filepath.Join(c.dataDir(), "member", "rocksdb")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embed: create %s: %w", dir, err)
	}
	b, err := rocksdb.Open(dir, rocksdb.DefaultOptions())
	if err != nil {
		return nil, fmt.Errorf("embed: open RocksDB engine in %s: %w", dir, err)
	}
	return b, nil
}

// serveWhenReady serves clients once the member is ready.
func (m *Member) serveWhenReady() {
	defer close(m.served)
	select {
	case <-m.srv.Ready():
	case <-m.srv.Done():
		return
	case <-m.closing:
		return
	}
	clients, err := etcdcompat.NewClientServer(etcdcompat.Config{
		Member:            m.srv.ClientMember(),
		MaxRequestBytes:   m.cfg.MaxRequestBytes,
		MaxTxnOps:         m.cfg.MaxTxnOps,
		Logger:            m.log,
		Metrics:           m.metrics,
		MetricsRegisterer: m.metrics,
	})
	if err != nil {
		m.fail(fmt.Errorf("embed: serve clients: %w", err))
		return
	}
	m.mu.Lock()
	m.clients = clients
	m.mu.Unlock()
	for _, l := range m.clientLs {
		go m.serve(func() error { return clients.Serve(l) }, "clients")
	}
	close(m.readyc)
}

// serve runs a listener's server; a failure stops the member.
func (m *Member) serve(run func() error, what string) {
	if err := run(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		select {
		case <-m.closing:
		default:
			m.fail(fmt.Errorf("embed: serve %s: %w", what, err))
		}
	}
}

// fail stops the member because of err, which Err delivers.
func (m *Member) fail(err error) {
	select {
	case m.errc <- err:
	default:
	}
	go m.Close()
}

// watchStop delivers the error of a member that stopped on its own.
func (m *Member) watchStop() {
	select {
	case <-m.srv.Done():
		if err := m.srv.Err(); err != nil {
			select {
			case m.errc <- err:
			default:
			}
		}
		go m.Close()
	case <-m.closing:
	}
}

// ReadyNotify is closed once the member serves clients.
func (m *Member) ReadyNotify() <-chan struct{} { return m.readyc }

// Err delivers the error that stopped the member on its own, if any, and
// is closed once the member has stopped.
func (m *Member) Err() <-chan error { return m.errc }

// StopNotify is closed once the member has stopped.
func (m *Member) StopNotify() <-chan struct{} { return m.stopped }

// ClientURLs are the URLs to dial the member at, with the ports it bound.
func (m *Member) ClientURLs() []string { return append([]string(nil), m.clientURLs...) }

// Config is the configuration the member runs with: the one it was
// started with, advertised URLs and initial cluster resolved.
func (m *Member) Config() Config { return m.cfg }

// Close stops the member gracefully and returns once it has stopped.
func (m *Member) Close() {
	m.stopOnce.Do(func() {
		close(m.closing)
		<-m.served
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		m.mu.Lock()
		clients := m.clients
		m.mu.Unlock()
		// Watch streams never end by themselves: end them first, so the
		// drain waits only for unary RPCs.
		m.srv.WatchHub().Close()
		if clients != nil {
			clients.Stop(ctx)
		}
		for _, l := range m.clientLs {
			l.Close() // when clients were never served
		}
		m.srv.Stop()
		for _, hs := range m.peers {
			hs.Close()
		}
		close(m.errc)
		close(m.stopped)
	})
	<-m.stopped
}

// boundURLs gives each URL asking for port 0 the port its listener (same
// position) bound, or the first listener's when there are fewer.
func boundURLs(us []url.URL, ls []net.Listener) []url.URL {
	out := make([]url.URL, len(us))
	for i, u := range us {
		l := ls[min(i, len(ls)-1)]
		out[i] = withPort(u, l.Addr().String())
	}
	return out
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func cmpOrURLs(us, def []url.URL) []url.URL {
	if len(us) == 0 {
		return def
	}
	return us
}
