package embed

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/host/memlimit"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/member"
	"github.com/metastore-io/metastore/internal/rocksdb"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// Member is a running member (internal/member: the runtime and etcd's
// client services, which own the listeners and order their own
// shutdown) behind etcd's embed API.
type Member struct {
	cfg        Config
	srv        *member.Member
	clientURLs []string

	errc     chan error    // one error from the member stopping on its own; closed once stopped
	stopped  chan struct{} // closed once everything has stopped
	watching chan struct{} // closed when watchStop has returned
	stopOnce sync.Once
}

// StartMember starts a member from cfg (which it copies): it binds the
// listeners, opens the data dir and the storage engine, starts Raft and
// serves peers. Clients are served once ReadyNotify is closed.
func StartMember(cfg *Config) (*Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	peerLs, clientLs, err := bindListeners(c.ListenPeerUrls, c.ListenClientUrls)
	if err != nil {
		return nil, err
	}
	c.resolveAdvertised(peerLs, clientLs)
	srv, err := startServer(&c, peerLs, clientLs)
	if err != nil {
		return nil, err
	}
	m := &Member{
		cfg:        c,
		srv:        srv,
		clientURLs: urlStrings(boundURLs(c.ListenClientUrls, clientLs)),
		errc:       make(chan error, 1),
		stopped:    make(chan struct{}),
		watching:   make(chan struct{}),
	}
	go m.watchStop()
	return m, nil
}

// withDefaults is a copy of c with the engine and cluster state it
// leaves empty filled in.
func (c Config) withDefaults() Config {
	c.StorageEngine = cmpOr(c.StorageEngine, "memory")
	c.ClusterState = cmpOr(c.ClusterState, ClusterStateNew)
	return c
}

// bindListeners binds the peer and client URLs; on error none stays open.
func bindListeners(peerURLs, clientURLs []url.URL) (peers, clients []net.Listener, err error) {
	if peers, err = listenAll(peerURLs); err != nil {
		return nil, nil, err
	}
	if clients, err = listenAll(clientURLs); err != nil {
		closeAll(peers)
		return nil, nil, err
	}
	return peers, clients, nil
}

func listenAll(us []url.URL) ([]net.Listener, error) {
	var out []net.Listener
	for _, u := range us {
		l, err := net.Listen("tcp", u.Host)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("embed: listen on %s: %w", u.String(), err)
		}
		out = append(out, l)
	}
	return out, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

// resolveAdvertised advertises the listen URLs when no others are given,
// with the ports the listeners bound, and makes the member a cluster of
// its own when no initial cluster is given.
func (c *Config) resolveAdvertised(peerLs, clientLs []net.Listener) {
	c.AdvertisePeerUrls = boundURLs(cmpOrURLs(c.AdvertisePeerUrls, c.ListenPeerUrls), peerLs)
	c.AdvertiseClientUrls = boundURLs(cmpOrURLs(c.AdvertiseClientUrls, c.ListenClientUrls), clientLs)
	if c.InitialCluster == "" {
		var peers []string
		for _, u := range c.AdvertisePeerUrls {
			peers = append(peers, c.Name+"="+u.String())
		}
		c.InitialCluster = strings.Join(peers, ",")
	}
}

// startServer opens the storage engine and starts the member, which
// owns the listeners from then on; on error nothing stays open.
func startServer(c *Config, peerLs, clientLs []net.Listener) (*member.Member, error) {
	initial, err := membership.ParseInitialCluster(c.InitialCluster)
	if err != nil {
		closeAll(peerLs)
		closeAll(clientLs)
		return nil, fmt.Errorf("embed: InitialCluster: %w", err)
	}
	backend, err := member.OpenBackend(c.dataDir(), c.StorageEngine, rocksdb.DefaultOptions())
	if err != nil {
		closeAll(peerLs)
		closeAll(clientLs)
		return nil, err
	}
	// The member owns the listeners from here on, also when Start fails.
	srv, err := member.Start(context.Background(), c.memberConfig(initial, backend, peerLs, clientLs))
	if err != nil {
		backend.Close()
		return nil, fmt.Errorf("embed: start member: %w", err)
	}
	return srv, nil
}

// memberConfig is the member's configuration for c.
func (c *Config) memberConfig(initial []membership.InitialMember, backend kvstore.Backend, peerLs, clientLs []net.Listener) member.Config {
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// A registry of its own: several members may run in one process.
	metrics := prometheus.NewRegistry()
	srv := member.ServerConfig{
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
		Memory:              memlimit.FromRuntime(),
		Logger:              logger,
		PeerListeners:       peerLs,
	}
	client := etcdcompat.Config{
		MaxRequestBytes:   c.MaxRequestBytes,
		MaxTxnOps:         c.MaxTxnOps,
		Logger:            logger,
		Metrics:           metrics,
		MetricsRegisterer: metrics,
	}
	return member.Config{Server: srv, Client: client, ClientListeners: clientListeners(clientLs)}
}

func clientListeners(ls []net.Listener) []member.ClientListener {
	out := make([]member.ClientListener, len(ls))
	for i, l := range ls {
		out[i] = member.ClientListener{Listener: l}
	}
	return out
}

// watchStop delivers the error of a member that stopped on its own, and
// finishes stopping it.
func (m *Member) watchStop() {
	defer close(m.watching)
	defer close(m.errc) // its only sender
	select {
	case <-m.srv.Done():
		if err := m.srv.Err(); err != nil {
			m.errc <- err
		}
		m.stop()
	case <-m.stopped:
	}
}

// ReadyNotify is closed once the member serves clients.
func (m *Member) ReadyNotify() <-chan struct{} { return m.srv.Ready() }

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
	m.stop()
	<-m.watching
}

func (m *Member) stop() {
	m.stopOnce.Do(func() {
		m.srv.Stop()
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
