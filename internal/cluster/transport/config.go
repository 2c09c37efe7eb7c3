package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
	"github.com/metastore-io/metastore/internal/format/raftsnap"
)

// Raft is the part of the local raft member the transport drives:
// *raftnode.Node implements it.
type Raft interface {
	// Step hands a message received from a peer to raft.
	Step(ctx context.Context, m raftpb.Message) error
	// ReportUnreachable tells raft a message to id was not delivered.
	ReportUnreachable(id uint64)
	// ReportSnapshot tells raft how sending a snapshot to id ended.
	ReportSnapshot(id uint64, status raft.SnapshotStatus)
}

// ClientTLS gives the TLS configuration of one outgoing connection;
// *tlsutil.Material implements it.
type ClientTLS interface {
	ClientConfig(serverName string) (*tls.Config, error)
}

// Config describes the local member and tunes the transport. Only ID and
// ClusterID are required.
type Config struct {
	// ID is the local member's raft ID; ClusterID the cluster it belongs
	// to. Every request carries both, and a peer of another cluster is
	// refused.
	ID, ClusterID uint64
	// Logger receives connection events. Nil discards them.
	Logger *slog.Logger
	// Metrics receives the transport's Prometheus collectors. Nil
	// registers nothing; the global registry is never used.
	Metrics prometheus.Registerer

	// Raft and Snapshots connect the transport to the local member when
	// it exists already (tests). A raft node needs its transport first,
	// so both are usually nil here and raftnode.Start attaches the node
	// (Attach); until then incoming raft traffic is refused with 503 and
	// peers retry.
	Raft Raft
	// Snapshots returns the member's snapshot file store: outgoing
	// snapshot images are read from it, incoming ones saved into it.
	Snapshots func() *raftsnap.Store

	// ServerVersion and MinClusterVersion are the etcd versions this
	// member announces to its peers (X-Server-Version,
	// X-Min-Cluster-Version) and checks theirs against. Defaults: etcd
	// 3.6's, rafthttp.ServerVersion and rafthttp.MinClusterVersion.
	ServerVersion, MinClusterVersion string
	// LocalURLs are this member's advertised peer URLs, announced in
	// X-PeerURLs as etcd does. Optional.
	LocalURLs []string

	// LocalAddr, if set, is the IP address connections to peers are
	// dialled from (etcd's SetMemberLocalAddr); otherwise the kernel
	// picks it.
	LocalAddr string

	// OnRemoved, if set, is called once, from a transport goroutine, when
	// a peer answers that it removed this member from the cluster (410 to
	// a stream, 403 to a POST): etcd's rafthttp reports that to its server,
	// which stops, so a member removed while it was cut off stops too
	// instead of campaigning forever. It must not block.
	OnRemoved func()

	// TLS, when set, is used to dial https:// peer URLs (peer TLS); its
	// ClientConfig is called for every new connection so that rotated
	// certificates and CA bundles apply to it. Nil refuses https URLs.
	TLS ClientTLS

	// DialTimeout bounds opening a TCP connection to a peer. Default 1s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds how long a peer may take to accept a stream
	// or answer a probe. Default 5s.
	HandshakeTimeout time.Duration
	// ConnTimeout declares a stream dead when a write makes no progress
	// for this long or nothing (not even a link heartbeat, sent every
	// ConnTimeout/3) arrives for this long: etcd's ConnReadTimeout and
	// ConnWriteTimeout. Default 5s.
	ConnTimeout time.Duration
	// SnapshotAckTimeout bounds how long the receiver may take, after the
	// whole image arrived, to make it durable and hand the snapshot to
	// raft. Default 1 minute.
	SnapshotAckTimeout time.Duration
	// BackoffMin and BackoffMax bound the pause between reconnection
	// attempts to one peer; it doubles from BackoffMin per failure and is
	// jittered. Defaults 50ms and 2s.
	BackoffMin, BackoffMax time.Duration
	// ProbeInterval is how often the round trip to each peer is measured.
	// Default 5s.
	ProbeInterval time.Duration
	// QueueSize is how many messages may wait for one peer's stream
	// (each of its two streams); beyond that Send drops. Default 4096
	// (etcd's stream buffer).
	QueueSize int
	// MaxFrameSize bounds one raft message (and one entry) read from a
	// stream, and one message written to it. Default 64 MiB.
	MaxFrameSize int
	// MaxForwardSize bounds a Forward request and its response. Default
	// 4 MiB.
	MaxForwardSize int
}

const (
	defaultDialTimeout        = time.Second
	defaultHandshakeTimeout   = 5 * time.Second
	defaultConnTimeout        = 5 * time.Second
	defaultSnapshotAckTimeout = time.Minute
	defaultBackoffMin         = 50 * time.Millisecond
	defaultBackoffMax         = 2 * time.Second
	defaultProbeInterval      = 5 * time.Second
	defaultQueueSize          = 4096
	defaultMaxFrameSize       = 64 << 20
	defaultMaxForwardSize     = 4 << 20
	// minMaxFrameSize keeps room for a heartbeat and a vote.
	minMaxFrameSize = 1 << 10
)

func (c Config) withDefaults() (Config, error) {
	if c.ID == 0 {
		return c, errors.New("transport: config: ID must be non-zero")
	}
	if c.ClusterID == 0 {
		return c, errors.New("transport: config: ClusterID must be non-zero")
	}
	if c.ServerVersion == "" {
		c.ServerVersion = rafthttp.ServerVersion
	}
	if c.MinClusterVersion == "" {
		c.MinClusterVersion = rafthttp.MinClusterVersion
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	setDefault(&c.DialTimeout, defaultDialTimeout)
	setDefault(&c.HandshakeTimeout, defaultHandshakeTimeout)
	setDefault(&c.ConnTimeout, defaultConnTimeout)
	setDefault(&c.SnapshotAckTimeout, defaultSnapshotAckTimeout)
	setDefault(&c.BackoffMin, defaultBackoffMin)
	setDefault(&c.BackoffMax, defaultBackoffMax)
	setDefault(&c.ProbeInterval, defaultProbeInterval)
	setDefault(&c.QueueSize, defaultQueueSize)
	setDefault(&c.MaxFrameSize, defaultMaxFrameSize)
	setDefault(&c.MaxForwardSize, defaultMaxForwardSize)
	if c.LocalAddr != "" && net.ParseIP(c.LocalAddr) == nil {
		return c, fmt.Errorf("transport: config: LocalAddr %q is not an IP address", c.LocalAddr)
	}
	if c.BackoffMax < c.BackoffMin {
		return c, errors.New("transport: config: BackoffMax is below BackoffMin")
	}
	if c.MaxFrameSize < minMaxFrameSize {
		return c, errors.New("transport: config: MaxFrameSize below 1 KiB cannot carry raft traffic")
	}
	return c, nil
}

func setDefault[T time.Duration | int](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
