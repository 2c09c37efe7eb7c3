package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/host/gcheadroom"
	"github.com/metastore-io/metastore/internal/lockservice"
	"github.com/metastore-io/metastore/internal/rocksdb"
)

// minSendBytes is the least --experimental-max-send-bytes: every answer
// but a large read's must still fit (a watch response is cut at
// --max-request-bytes, 1.5 MiB by default).
const minSendBytes = 1 << 20

// options are the serve flags. Names and defaults are etcd's, so an etcd
// command line (or an ETCD_* environment) starts a MetaStore member.
type options struct {
	name                     string
	dataDir                  string
	listenClientURLs         string
	advertiseClientURLs      string
	listenPeerURLs           string
	initialAdvertisePeerURLs string
	initialCluster           string
	initialClusterState      string
	initialClusterToken      string
	strictReconfigCheck      bool
	maxLearners              int
	snapshotCount            uint64
	maxRequestBytes          uint
	maxSendBytes             int
	lockServiceLockDelay     time.Duration
	maxTxnOps                uint
	compactionBatchLimit     int
	heartbeatMs              uint
	electionMs               uint
	storageEngine            string
	watchProgressInterval    time.Duration
	enablePprof              bool
	metrics                  string
	gcHeadroomPercent        int
	gcMinHeadroomBytes       uint64
	rocksdb                  rocksdbFlags

	// One struct per area of etcd's command line, each registered by
	// its own file (flags_<area>.go) from register below.
	configFile string // --config-file: see configfile.go
	log        logFlags
	listen     listenFlags
	features   featureGates
	discovery  discoveryFlags
	noEffect   noEffectFlags
	raft       raftFlags
	ops        opsFlags // flags_ops.go
	tls        tlsFlags // flags_tls.go
	auth       authFlags
}

// rocksdbFlags tune the RocksDB engine (--storage-engine=rocksdb); their
// defaults are rocksdb.DefaultOptions.
type rocksdbFlags struct {
	blockCacheBytes   int64
	bloomBitsPerKey   float64
	compression       string
	writeBufferBytes  int64
	maxWriteBuffers   int
	maxBackgroundJobs int
	statsInterval     time.Duration
}

// register adds every serve flag to fs. Each area of etcd's command line
// registers its own flags; add an area by adding a line here and a
// flags_<area>.go file. registerDeprecated runs last: it aliases the old
// --experimental-* spellings onto flags registered before it.
func (o *options) register(fs *pflag.FlagSet) {
	o.registerMember(fs)
	fs.StringVar(&o.configFile, "config-file", "", "Path to the server configuration file. Note that if a configuration file is provided, other command line flags and environment variables will be ignored.")
	o.registerRaft(fs)
	o.registerLog(fs)
	o.registerListen(fs)
	o.registerFeatures(fs)
	o.registerDiscovery(fs)
	o.registerNoEffect(fs)
	registerDeprecated(fs)
}

// registerMember adds the member and cluster flags.
func (o *options) registerMember(fs *pflag.FlagSet) {
	fs.StringVar(&o.name, "name", "default", "Human-readable name for this member.")
	fs.StringVar(&o.dataDir, "data-dir", "", "Path to the data directory (default \"${name}.metastore\").")
	fs.StringVar(&o.listenClientURLs, "listen-client-urls", "http://localhost:2379", "List of URLs to listen on for client traffic.")
	fs.StringVar(&o.advertiseClientURLs, "advertise-client-urls", "http://localhost:2379", "List of this member's client URLs to advertise to the rest of the cluster.")
	fs.StringVar(&o.listenPeerURLs, "listen-peer-urls", "http://localhost:2380", "List of URLs to listen on for peer traffic.")
	fs.StringVar(&o.initialAdvertisePeerURLs, "initial-advertise-peer-urls", "http://localhost:2380", "List of this member's peer URLs to advertise to the rest of the cluster.")
	fs.StringVar(&o.initialCluster, "initial-cluster", "", "Initial cluster configuration for bootstrapping (default \"${name}=${initial-advertise-peer-urls}\").")
	fs.StringVar(&o.initialClusterState, "initial-cluster-state", "new", "Initial cluster state ('new' or 'existing').")
	fs.StringVar(&o.initialClusterToken, "initial-cluster-token", "etcd-cluster", "Initial cluster token for the cluster during bootstrap.")
	fs.BoolVar(&o.strictReconfigCheck, "strict-reconfig-check", true, "Reject reconfiguration requests that would cause quorum loss.")
	fs.IntVar(&o.maxLearners, "max-learners", 1, "Sets the maximum number of learners that can be available in the cluster membership.")
	fs.Uint64Var(&o.snapshotCount, "snapshot-count", 10000, "Number of committed transactions to trigger a snapshot to disk.")
	fs.UintVar(&o.maxRequestBytes, "max-request-bytes", 1.5*1024*1024, "Maximum client request size in bytes the server will accept.")
	// MetaStore's own: etcd's server has no such flag (its grpc-proxy's
	// --max-send-bytes is the client side of a proxy).
	fs.IntVar(&o.maxSendBytes, "experimental-max-send-bytes", math.MaxInt32, "MetaStore only: largest message the gRPC server sends a client, in bytes (etcd's fixed math.MaxInt32 by default); a range whose response would be larger is refused with ResourceExhausted before it is built.")
	// MetaStore's own: etcd has no HTTP lock service.
	fs.DurationVar(&o.lockServiceLockDelay, "lock-service-lock-delay", lockservice.DefaultLockDelay, "MetaStore only: the HTTP lock service's lock delay: a holder is told to stop believing it holds the lock at least this long before anybody else can be granted it after a failure (a frozen or cut-off member, a vanished client). Must be above 0 and below the lock lease's TTL·0.98 less a renewal period.")
	fs.UintVar(&o.maxTxnOps, "max-txn-ops", 128, "Maximum number of operations permitted in a transaction.")
	fs.IntVar(&o.compactionBatchLimit, "compaction-batch-limit", 1000, "CompactionBatchLimit sets the maximum revisions deleted in each compaction batch.")
	fs.UintVar(&o.heartbeatMs, "heartbeat-interval", 100, "Time (in milliseconds) of a heartbeat interval.")
	fs.UintVar(&o.electionMs, "election-timeout", 1000, "Time (in milliseconds) for an election to timeout.")
	fs.StringVar(&o.storageEngine, "storage-engine", "memory", "Storage engine: memory or rocksdb.")
	fs.DurationVar(&o.watchProgressInterval, "watch-progress-notify-interval", 10*time.Minute, "Duration of periodic watch progress notifications.")
	// As in etcd, any value but "extensive" means basic.
	fs.StringVar(&o.metrics, "metrics", "basic", "Set level of detail for exported metrics, specify 'extensive' to include server side grpc histogram metrics")
	fs.BoolVar(&o.enablePprof, "enable-pprof", false, "Enable runtime profiling data via HTTP server. Address is at client URL + \"/debug/pprof/\"")

	o.ops.register(fs)
	o.tls.register(fs)
	o.auth.register(fs)

	gc := gcheadroom.DefaultConfig()
	fs.IntVar(&o.gcHeadroomPercent, "gc-headroom-percent", gc.Percent, "Go garbage collector: heap headroom above the live heap, in percent of it (like GOGC), once that exceeds --gc-min-headroom-bytes. Ignored when the GOGC environment variable is set.")
	fs.Uint64Var(&o.gcMinHeadroomBytes, "gc-min-headroom-bytes", gc.MinHeadroom, "Go garbage collector: least heap headroom above the live heap, in bytes, but never more than the live heap (GOGC=100). Ignored when the GOGC environment variable is set.")

	def := rocksdb.DefaultOptions()
	fs.Int64Var(&o.rocksdb.blockCacheBytes, "rocksdb-block-cache-bytes", def.BlockCacheSize, "RocksDB engine: LRU block cache size in bytes (bounds read memory).")
	fs.Float64Var(&o.rocksdb.bloomBitsPerKey, "rocksdb-bloom-bits-per-key", def.BloomBitsPerKey, "RocksDB engine: Bloom filter bits per key (0 disables filters).")
	fs.StringVar(&o.rocksdb.compression, "rocksdb-compression", string(def.Compression), "RocksDB engine: block compression: none, snappy, lz4 or zstd.")
	fs.Int64Var(&o.rocksdb.writeBufferBytes, "rocksdb-write-buffer-bytes", def.WriteBufferSize, "RocksDB engine: memtable size in bytes.")
	fs.IntVar(&o.rocksdb.maxWriteBuffers, "rocksdb-max-write-buffers", def.MaxWriteBuffers, "RocksDB engine: memtables kept before writes stall.")
	fs.IntVar(&o.rocksdb.maxBackgroundJobs, "rocksdb-max-background-jobs", def.MaxBackgroundJobs, "RocksDB engine: concurrent flush and compaction jobs.")
	fs.DurationVar(&o.rocksdb.statsInterval, "rocksdb-stats-interval", def.StatsInterval, "RocksDB engine: log RocksDB's statistics (per-level compactions, write stalls, block cache hits, get/write/seek times) every interval, e.g. 10s; turns RocksDB's statistics on, which costs some CPU per operation. 0: off.")
}

// gcHeadroom turns the flags into the garbage collector policy.
func (o *options) gcHeadroom(logger *slog.Logger) gcheadroom.Config {
	cfg := gcheadroom.DefaultConfig()
	cfg.Percent = o.gcHeadroomPercent
	cfg.MinHeadroom = o.gcMinHeadroomBytes
	cfg.Logger = logger
	return cfg
}

// rocksdbOptions turns the flags into engine options.
func (o *options) rocksdbOptions(logger *slog.Logger) (rocksdb.Options, error) {
	opts := rocksdb.DefaultOptions()
	c, err := rocksdb.ParseCompression(o.rocksdb.compression)
	if err != nil {
		return opts, fmt.Errorf("--rocksdb-compression: %w", err)
	}
	opts.Logger = logger
	opts.BlockCacheSize = o.rocksdb.blockCacheBytes
	opts.BloomBitsPerKey = o.rocksdb.bloomBitsPerKey
	opts.Compression = c
	opts.WriteBufferSize = o.rocksdb.writeBufferBytes
	opts.MaxWriteBuffers = o.rocksdb.maxWriteBuffers
	opts.MaxBackgroundJobs = o.rocksdb.maxBackgroundJobs
	opts.StatsInterval = o.rocksdb.statsInterval
	return opts, nil
}

// pprofEnabled reports whether /debug/pprof/ is served: with
// --enable-pprof, or at --log-level=debug as etcd does.
func (o *options) pprofEnabled() bool {
	return o.enablePprof || o.log.level == "debug"
}

// applyEnv sets every flag not given on the command line from
// ETCD_<FLAG_NAME> (etcd's convention) or METASTORE_<FLAG_NAME>, the latter
// winning.
func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		suffix := strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		for _, prefix := range []string{"METASTORE_", "ETCD_"} {
			if v, ok := os.LookupEnv(prefix + suffix); ok {
				if serr := fs.Set(f.Name, v); serr != nil {
					err = fmt.Errorf("invalid value %q for %s%s: %w", v, prefix, suffix, serr)
				}
				return
			}
		}
	})
	return err
}

// validate checks the options as etcd's config validation does and fills
// the derived defaults.
func (o *options) validate() error {
	if o.dataDir == "" {
		o.dataDir = o.name + ".metastore"
	}
	for _, check := range []func() error{
		o.validateURLs,
		o.validateInitialCluster,
		o.validateRaft,
		o.validateLimits,
		func() error { return o.logConfig().Validate() },
		o.listen.validate,
		o.ops.validate,
		func() error { return o.tls.validate(o) },
		o.validateGCHeadroom,
		o.validateStorageEngine,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateURLs checks the URL lists a member cannot go without.
func (o *options) validateURLs() error {
	for _, f := range []struct{ flag, list string }{
		{"--listen-client-urls", o.listenClientURLs},
		{"--advertise-client-urls", o.advertiseClientURLs},
		{"--listen-peer-urls", o.listenPeerURLs},
		{"--initial-advertise-peer-urls", o.initialAdvertisePeerURLs},
	} {
		for _, u := range splitURLs(f.list) {
			if err := membership.ValidateURL(u); err != nil {
				return fmt.Errorf("%s: %w", f.flag, err)
			}
		}
		if len(splitURLs(f.list)) == 0 {
			return fmt.Errorf("%s must not be empty", f.flag)
		}
	}
	return nil
}

// validateInitialCluster defaults --initial-cluster to this member alone
// and checks it and --initial-cluster-state.
func (o *options) validateInitialCluster() error {
	if o.initialCluster == "" {
		parts := []string{}
		for _, u := range splitURLs(o.initialAdvertisePeerURLs) {
			parts = append(parts, o.name+"="+u)
		}
		o.initialCluster = strings.Join(parts, ",")
	}
	if _, err := membership.ParseInitialCluster(o.initialCluster); err != nil {
		return err
	}
	switch o.initialClusterState {
	case "new", "existing":
		return nil
	default:
		return fmt.Errorf("unexpected --initial-cluster-state %q: want new or existing", o.initialClusterState)
	}
}

// validateRaft checks the timing and snapshot flags as etcd does.
func (o *options) validateRaft() error {
	if o.heartbeatMs == 0 {
		return fmt.Errorf("--heartbeat-interval must be greater than 0")
	}
	if 5*o.heartbeatMs > o.electionMs {
		return fmt.Errorf("--election-timeout[%vms] should be at least as 5 times as --heartbeat-interval[%vms]", o.electionMs, o.heartbeatMs)
	}
	if o.electionMs > 50000 {
		return fmt.Errorf("--election-timeout[%vms] is too long, and should be set less than 50000ms", o.electionMs)
	}
	if o.snapshotCount == 0 {
		return fmt.Errorf("--snapshot-count must be greater than 0")
	}
	return nil
}

// validateLimits checks the request and membership limits.
func (o *options) validateLimits() error {
	if o.maxRequestBytes == 0 {
		return fmt.Errorf("--max-request-bytes must be greater than 0")
	}
	if o.maxSendBytes < minSendBytes || o.maxSendBytes > math.MaxInt32 {
		return fmt.Errorf("--experimental-max-send-bytes %d: must be from %d to %d", o.maxSendBytes, minSendBytes, math.MaxInt32)
	}
	if o.maxLearners < 1 {
		return fmt.Errorf("--max-learners must be at least 1")
	}
	if most := lockservice.MaxLockDelay(lockservice.DefaultLeaseTTL); o.lockServiceLockDelay <= 0 || o.lockServiceLockDelay >= most {
		return fmt.Errorf("--lock-service-lock-delay %v: must be above 0 and below %v (the %v lock lease's TTL·(1−2·0.01) less a renewal period)",
			o.lockServiceLockDelay, most, lockservice.DefaultLeaseTTL)
	}
	if o.maxTxnOps == 0 {
		return fmt.Errorf("--max-txn-ops must be greater than 0")
	}
	return nil
}

func (o *options) validateGCHeadroom() error {
	if err := o.gcHeadroom(nil).Validate(); err != nil {
		return fmt.Errorf("--gc-headroom-percent: %w", err)
	}
	return nil
}

func (o *options) validateStorageEngine() error {
	switch o.storageEngine {
	case "memory":
		return nil
	case "rocksdb":
		_, err := o.rocksdbOptions(nil)
		return err
	default:
		return fmt.Errorf("unknown --storage-engine %q: want memory or rocksdb", o.storageEngine)
	}
}

func splitURLs(list string) []string {
	var out []string
	for _, u := range strings.Split(list, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}
