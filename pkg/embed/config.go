package embed

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"
)

// Defaults, etcd's (server/embed/config.go).
const (
	DefaultName                = "default"
	DefaultListenPeerURL       = "http://localhost:2380"
	DefaultListenClientURL     = "http://localhost:2379"
	DefaultSnapshotCount       = 10000
	DefaultTickMs              = 100
	DefaultElectionMs          = 1000
	DefaultMaxTxnOps           = 128
	DefaultMaxRequestBytes     = 1.5 * 1024 * 1024
	DefaultInitialClusterToken = "etcd-cluster"

	// ClusterStateNew and ClusterStateExisting are the values of
	// Config.ClusterState (--initial-cluster-state).
	ClusterStateNew      = "new"
	ClusterStateExisting = "existing"
)

// Config is a member's configuration, with etcd's embed.Config field
// names for what MetaStore has.
type Config struct {
	// Name is the member's human-readable name (--name).
	Name string
	// Dir is the data directory (--data-dir); "" means "<Name>.metastore".
	Dir string
	// StorageEngine is "memory" (the default; the data dir still holds
	// the WAL and snapshots) or "rocksdb" (--storage-engine).
	StorageEngine string

	ListenPeerUrls      []url.URL // --listen-peer-urls
	ListenClientUrls    []url.URL // --listen-client-urls
	AdvertisePeerUrls   []url.URL // --initial-advertise-peer-urls
	AdvertiseClientUrls []url.URL // --advertise-client-urls

	// InitialCluster is "name=peerURL,..." (--initial-cluster); ""
	// means this member alone, at its advertised peer URLs.
	InitialCluster      string
	InitialClusterToken string // --initial-cluster-token
	// ClusterState is ClusterStateNew or ClusterStateExisting.
	ClusterState string

	SnapshotCount   uint64 // --snapshot-count
	TickMs          uint   // --heartbeat-interval
	ElectionMs      uint   // --election-timeout
	MaxTxnOps       uint   // --max-txn-ops
	MaxRequestBytes uint   // --max-request-bytes

	// Logger receives the member's log lines; nil discards them (etcd's
	// embed logs to stderr; a test rarely wants that).
	Logger *slog.Logger
}

// NewConfig returns etcd's defaults: one member named "default" on
// localhost's ports 2379 and 2380.
func NewConfig() *Config {
	peer, _ := url.Parse(DefaultListenPeerURL)
	client, _ := url.Parse(DefaultListenClientURL)
	return &Config{
		Name:                DefaultName,
		StorageEngine:       "memory",
		ListenPeerUrls:      []url.URL{*peer},
		ListenClientUrls:    []url.URL{*client},
		AdvertisePeerUrls:   []url.URL{*peer},
		AdvertiseClientUrls: []url.URL{*client},
		InitialClusterToken: DefaultInitialClusterToken,
		ClusterState:        ClusterStateNew,
		SnapshotCount:       DefaultSnapshotCount,
		TickMs:              DefaultTickMs,
		ElectionMs:          DefaultElectionMs,
		MaxTxnOps:           DefaultMaxTxnOps,
		MaxRequestBytes:     DefaultMaxRequestBytes,
	}
}

// Validate checks the configuration as etcd's flags are checked.
func (c *Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("embed: Name is empty"))
	}
	if len(c.ListenPeerUrls) == 0 || len(c.ListenClientUrls) == 0 {
		errs = append(errs, errors.New("embed: ListenPeerUrls and ListenClientUrls need at least one URL each"))
	}
	for _, u := range append(append(append(append([]url.URL(nil), c.ListenPeerUrls...), c.ListenClientUrls...), c.AdvertisePeerUrls...), c.AdvertiseClientUrls...) {
		if u.Scheme != "http" || u.Host == "" {
			errs = append(errs, fmt.Errorf("embed: URL %q: want http://host:port (TLS is configured through the metastore command)", u.String()))
		}
	}
	switch c.StorageEngine {
	case "", "memory", "rocksdb":
	default:
		errs = append(errs, fmt.Errorf("embed: unknown StorageEngine %q: want memory or rocksdb", c.StorageEngine))
	}
	switch c.ClusterState {
	case "", ClusterStateNew, ClusterStateExisting:
	default:
		errs = append(errs, fmt.Errorf("embed: ClusterState %q: want %q or %q", c.ClusterState, ClusterStateNew, ClusterStateExisting))
	}
	if c.TickMs == 0 || c.ElectionMs < 5*c.TickMs {
		errs = append(errs, fmt.Errorf("embed: ElectionMs %d must be at least 5 times TickMs %d", c.ElectionMs, c.TickMs))
	}
	return errors.Join(errs...)
}

func (c *Config) dataDir() string {
	if c.Dir != "" {
		return c.Dir
	}
	return c.Name + ".metastore"
}

func (c *Config) tick() time.Duration { return time.Duration(c.TickMs) * time.Millisecond }

func urlStrings(us []url.URL) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.String()
	}
	return out
}

// withPort returns u with the port of addr ("host:port") when u asks
// for port 0.
func withPort(u url.URL, addr string) url.URL {
	if u.Port() != "0" {
		return u
	}
	if _, port, err := net.SplitHostPort(addr); err == nil {
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	return u
}
