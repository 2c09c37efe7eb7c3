package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
	"github.com/metastore-io/metastore/internal/format/raftsnap"
	"github.com/metastore-io/metastore/internal/raftnode"
)

var (
	// ErrUnknownPeer is wrapped by Forward errors for a member that was
	// never added or was removed.
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrUnreachable is wrapped by Forward errors when the request did
	// not get an answer from the peer (connection refused or lost).
	ErrUnreachable = errors.New("transport: peer unreachable")
	// ErrStopped is returned by calls on a stopped transport.
	ErrStopped = errors.New("transport: stopped")
)

// Transport carries raft messages, snapshots and forwarded requests
// between the members of one cluster. It implements raftnode.Transport.
type Transport struct {
	cfg     Config
	self    rafthttp.Local // what this member says of itself to peers
	log     *slog.Logger
	metrics *metrics
	// streams opens the readers' streams: one connection each, every
	// read bounded by ConnTimeout. calls carries snapshots, probes and
	// forwarded requests over pooled connections, bounded by their
	// contexts.
	streams *http.Client
	calls   *http.Client
	conns   *connTracker // of both clients
	handler http.Handler

	local atomic.Pointer[attachment]
	// attachedc is closed once local is set: readers open their streams
	// only then, since nothing they would receive before could be stepped.
	attachedc  chan struct{}
	attachOnce sync.Once
	// removedOnce calls Config.OnRemoved once.
	removedOnce sync.Once

	// peers is replaced, never modified, so Send reads it without a lock;
	// writers serialise on mu.
	//
	// Lock order: mu before a peer's mu (AddPeer updates a known peer's
	// URLs under it); forwardMu, the connection tracker's and the refusal
	// log's locks are leaves, never held while another lock is taken.
	peers   atomic.Pointer[map[uint64]*peer]
	mu      sync.Mutex
	removed map[uint64]bool
	stopped bool

	forwardMu       sync.RWMutex
	forwardHandlers map[string]ForwardHandler

	refusals refusalLogs

	ctx      context.Context // cancelled by Stop
	cancel   context.CancelFunc
	wg       sync.WaitGroup // peer goroutines and requests being served
	stopOnce sync.Once
}

var _ raftnode.Transport = (*Transport)(nil)

// attachment is the local member, set once by New or Attach.
type attachment struct {
	raft      Raft
	snapshots func() *raftsnap.Store
}

// New creates a transport for the member cfg.ID. It sends nothing until
// peers are added and receives nothing until its Handler is served (and
// refuses raft traffic until Raft is attached).
func New(cfg Config) (*Transport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Metrics, cfg.ID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	if cfg.LocalAddr != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(cfg.LocalAddr)}
	}
	conns := newConnTracker(dialer)
	t := &Transport{
		cfg: cfg,
		self: rafthttp.Local{ID: cfg.ID, ClusterID: cfg.ClusterID, ServerVersion: cfg.ServerVersion,
			MinClusterVersion: cfg.MinClusterVersion, PeerURLs: cfg.LocalURLs},
		log:             cfg.Logger.With("component", "transport", "local-member", idString(cfg.ID)),
		metrics:         m,
		streams:         newPeerClient(cfg, conns, cfg.ConnTimeout),
		calls:           newPeerClient(cfg, conns, 0),
		conns:           conns,
		removed:         map[uint64]bool{},
		forwardHandlers: map[string]ForwardHandler{},
		refusals:        refusalLogs{byKey: map[refusalKey]*logLimiter{}},
		attachedc:       make(chan struct{}),
		ctx:             ctx,
		cancel:          cancel,
	}
	t.peers.Store(&map[uint64]*peer{})
	t.handler = t.newHandler()
	if cfg.Raft != nil {
		t.attach(&attachment{raft: cfg.Raft, snapshots: cfg.Snapshots})
	}
	return t, nil
}

// newPeerClient is an HTTP/1.1 client to peers, as etcd's rafthttp
// round trippers: cleartext to http:// URLs, TLS with the member's peer
// certificates to https:// ones. ioTimeout > 0 makes it a stream client:
// one connection per request, and a read or write that makes no progress
// for ioTimeout fails (the peer writes a link heartbeat well within it).
func newPeerClient(cfg Config, conns *connTracker, ioTimeout time.Duration) *http.Client {
	dial := conns.DialContext
	if ioTimeout > 0 {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := conns.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &deadlineConn{Conn: c, timeout: ioTimeout}, nil
		}
	}
	tr := &http.Transport{
		DialContext:         dial,
		DisableCompression:  true,
		DisableKeepAlives:   ioTimeout > 0,
		IdleConnTimeout:     idleConnTimeout,
		MaxIdleConnsPerHost: maxIdleConnsPerPeer,
		// Never HTTP/2: etcd's peers speak HTTP/1.1 only.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	if cfg.TLS != nil {
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialTLS(ctx, cfg, dial, network, addr)
		}
	}
	return &http.Client{Transport: tr}
}

// dialTLS opens a TLS connection to a peer with the configuration of the
// moment, the handshake bounded by HandshakeTimeout. The TCP connection
// is tracked, so Stop closes it like a cleartext one.
func dialTLS(ctx context.Context, cfg Config, dial func(context.Context, string, string) (net.Conn, error), network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := cfg.TLS.ClientConfig("")
	if err != nil {
		return nil, fmt.Errorf("peer TLS configuration: %w", err)
	}
	if tlsCfg.ServerName == "" {
		tlsCfg.ServerName = host
	}
	tlsCfg.NextProtos = []string{"http/1.1"}
	raw, err := dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, tlsCfg)
	hctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	return tc, nil
}

const (
	peerReadHeaderTimeout = 5 * time.Second
	idleConnTimeout       = 2 * time.Minute
	// maxIdleConnsPerPeer keeps connections for concurrent forwarded
	// calls (lease renewals from many clients) from being redialled.
	maxIdleConnsPerPeer = 64
)

// Attach connects the transport to the local member: raftnode.Start calls
// it (the transport is a raftnode.Transport) once the node's files are
// open and before raft runs; until then raft traffic is refused. Only the
// first call has an effect.
func (t *Transport) Attach(local raftnode.Local) {
	t.attach(&attachment{raft: local, snapshots: local.Snapshots})
}

func (t *Transport) attach(a *attachment) {
	t.attachOnce.Do(func() {
		t.local.Store(a)
		close(t.attachedc)
	})
}

func (t *Transport) attached() *attachment { return t.local.Load() }

// Handler serves the peer API under /raft/; mount it on the peer
// listener's server, configured with ConfigureServer.
func (t *Transport) Handler() http.Handler { return t.handler }

// ConfigureServer prepares the peer listener's server for the peer API:
// HTTP/1.1 only, as etcd's peers speak it (the streams are long-lived
// responses; their writes carry their own deadlines, so the server has
// no write timeout), and a bound on reading request headers.
func (t *Transport) ConfigureServer(srv *http.Server) {
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	if srv.ReadHeaderTimeout == 0 {
		srv.ReadHeaderTimeout = peerReadHeaderTimeout
	}
}

// AddPeer starts talking to member id at urls (http://host:port, tried in
// turn). Adding a known peer updates its URLs; adding the local member is
// a no-op. A peer removed earlier may be added again.
func (t *Transport) AddPeer(id uint64, urls []string) error {
	if id == t.cfg.ID {
		return nil
	}
	base, err := parsePeerURLs(urls, t.cfg.TLS != nil)
	if err != nil {
		return fmt.Errorf("transport: add peer %s: %w", idString(id), err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return ErrStopped
	}
	cur := *t.peers.Load()
	if p, ok := cur[id]; ok {
		p.setURLs(base)
		return nil
	}
	delete(t.removed, id)
	p := newPeer(t, id, base)
	next := maps.Clone(cur)
	next[id] = p
	t.peers.Store(&next)
	p.start()
	t.log.Info("added peer", "peer", idString(id), "urls", base)
	return nil
}

// UpdatePeer replaces the URLs of member id; its stream reconnects if the
// URL in use is no longer listed.
func (t *Transport) UpdatePeer(id uint64, urls []string) error {
	base, err := parsePeerURLs(urls, t.cfg.TLS != nil)
	if err != nil {
		return fmt.Errorf("transport: update peer %s: %w", idString(id), err)
	}
	p := t.peer(id)
	if p == nil {
		return fmt.Errorf("transport: update peer %s: %w", idString(id), ErrUnknownPeer)
	}
	p.setURLs(base)
	t.log.Info("updated peer", "peer", idString(id), "urls", base)
	return nil
}

// RemovePeer stops talking to member id and refuses its traffic from now
// on. It does not wait for the peer's goroutines (Stop does).
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	cur := *t.peers.Load()
	p, ok := cur[id]
	if ok {
		next := maps.Clone(cur)
		delete(next, id)
		t.peers.Store(&next)
	}
	t.removed[id] = true
	t.mu.Unlock()
	if ok {
		p.stop()
		t.metrics.forgetPeer(idString(id))
		t.log.Info("removed peer", "peer", idString(id))
	}
}

func (t *Transport) peer(id uint64) *peer { return (*t.peers.Load())[id] }

// Send queues msgs for their peers and returns without blocking. A message
// for a peer whose stream is down or whose queue is full is dropped and
// the peer reported unreachable (once per call); a snapshot that cannot be
// queued is reported failed. Messages for unknown members are dropped.
func (t *Transport) Send(msgs []raftpb.Message) {
	peers := *t.peers.Load()
	// A Ready holds messages for a handful of peers: a small array on the
	// stack remembers whom to report without allocating.
	var buf [8]uint64
	unreachable := buf[:0]
	for i := range msgs {
		m := &msgs[i]
		p := peers[m.To]
		if p == nil {
			continue
		}
		if m.Type == raftpb.MsgSnap {
			p.queueSnapshot(*m)
			continue
		}
		if !p.enqueue(m) && !slices.Contains(unreachable, m.To) {
			unreachable = append(unreachable, m.To)
		}
	}
	for _, id := range unreachable {
		t.reportUnreachable(id)
	}
}

// reportRemoved passes on a peer's word that this member was removed.
func (t *Transport) reportRemoved(peer uint64, err error) {
	t.removedOnce.Do(func() {
		t.log.Warn("a peer says this member was removed from the cluster", "peer", idString(peer), "err", err)
		if t.cfg.OnRemoved != nil {
			t.cfg.OnRemoved()
		}
	})
}

func (t *Transport) reportUnreachable(id uint64) {
	if a := t.attached(); a != nil {
		a.raft.ReportUnreachable(id)
	}
}

func (t *Transport) reportSnapshot(id uint64, status raft.SnapshotStatus) {
	if a := t.attached(); a != nil {
		a.raft.ReportSnapshot(id, status)
	}
}

// Stop closes every stream, fails snapshots in flight, and waits for the
// transport's goroutines and incoming streams to end. It is idempotent;
// whoever created the transport calls it, after stopping the raft node.
func (t *Transport) Stop() {
	t.stopOnce.Do(func() {
		t.mu.Lock()
		t.stopped = true
		peers := *t.peers.Load()
		t.peers.Store(&map[uint64]*peer{})
		t.mu.Unlock()
		for _, p := range peers {
			p.stop()
		}
		t.cancel()
		t.conns.closeAll()
		t.wg.Wait()
		t.metrics.unregister()
		t.log.Info("transport stopped")
	})
}

// PeerStatus describes one peer for health reporting.
type PeerStatus struct {
	ID   uint64
	URLs []string
	// Active is whether the outgoing message stream is connected; Since
	// is when it last changed.
	Active bool
	Since  time.Time
	// LastError is why the stream last failed or was refused.
	LastError string
	// RoundTrip is the latest probe's round trip, 0 before the first.
	RoundTrip time.Duration
	// Dropped counts messages to this peer dropped so far.
	Dropped uint64
}

// PeerStatus returns the status of member id, false if it is not a peer.
func (t *Transport) PeerStatus(id uint64) (PeerStatus, bool) {
	p := t.peer(id)
	if p == nil {
		return PeerStatus{}, false
	}
	return p.status(), true
}

// ActivePeers returns the peers whose outgoing stream is connected, in
// increasing ID order.
func (t *Transport) ActivePeers() []uint64 {
	var ids []uint64
	for id, p := range *t.peers.Load() {
		if p.active.Load() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// parsePeerURLs validates peer URLs and returns them as base URLs without
// a trailing slash.
func parsePeerURLs(urls []string, tlsEnabled bool) ([]string, error) {
	if len(urls) == 0 {
		return nil, errors.New("no peer URLs")
	}
	out := make([]string, 0, len(urls))
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("peer URL %q: %w", raw, err)
		}
		switch {
		case u.Scheme == "https" && !tlsEnabled:
			return nil, fmt.Errorf("peer URL %q: https needs peer TLS (--peer-cert-file, --peer-key-file or --peer-auto-tls)", raw)
		case u.Scheme != "http" && u.Scheme != "https":
			return nil, fmt.Errorf("peer URL %q: scheme must be http or https", raw)
		case u.Host == "":
			return nil, fmt.Errorf("peer URL %q: no host", raw)
		case u.RawQuery != "" || u.Fragment != "":
			return nil, fmt.Errorf("peer URL %q: no query or fragment allowed", raw)
		}
		out = append(out, strings.TrimSuffix(u.String(), "/"))
	}
	return out, nil
}

// idString formats a member ID the way etcd prints it.
func idString(id uint64) string { return fmt.Sprintf("%x", id) }
