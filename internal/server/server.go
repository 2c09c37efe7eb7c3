package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/compactor"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/membership"
	"github.com/metastore-io/metastore/internal/raftnode"
	"github.com/metastore-io/metastore/internal/transport"
	"github.com/metastore-io/metastore/internal/watch"
)

// Config is what a member needs to start. cmd/metastore fills it from etcd's
// flag names.
type Config struct {
	Name    string
	DataDir string // the member keeps its WAL and snapshots under DataDir/member

	InitialCluster      []membership.InitialMember
	InitialClusterToken string
	NewCluster          bool // --initial-cluster-state=new
	PeerURLs            []string
	ClientURLs          []string

	SnapshotCount   uint64
	MaxRequestBytes uint
	MaxTxnOps       uint
	TickInterval    time.Duration // --heartbeat-interval
	// WatchProgressNotifyInterval is --watch-progress-notify-interval
	// (0: etcd's default of 10 minutes).
	WatchProgressNotifyInterval time.Duration
	ElectionTicks               int // --election-timeout / --heartbeat-interval

	// StrictReconfigCheck refuses membership changes that would leave
	// fewer started or connected voters than a quorum
	// (--strict-reconfig-check, on by default in cmd).
	StrictReconfigCheck bool
	// MaxLearners bounds the learner members (--max-learners); 0 means
	// etcd's default of 1.
	MaxLearners int

	// QuotaBackendBytes is --quota-backend-bytes: 0 etcd's default of
	// 2 GiB, negative no quota (quota.go).
	QuotaBackendBytes int64
	// SnapshotCatchUpEntries is --snapshot-catchup-entries (0: etcd's 5000,
	// at most half of SnapshotCount); DisablePreVote is --pre-vote=false;
	// DisableElectionTickAdvance is --initial-election-tick-advance=false.
	SnapshotCatchUpEntries     uint64
	DisablePreVote             bool
	DisableElectionTickAdvance bool
	// AutoCompactionMode and AutoCompactionRetention are
	// --auto-compaction-mode and --auto-compaction-retention as
	// compactor.ParseRetention parsed them (0: no auto-compaction).
	AutoCompactionMode      string
	AutoCompactionRetention time.Duration
	// WarningApplyDuration is etcd's --warning-apply-duration: applies and
	// reads slower than this are logged and counted in
	// etcd_server_slow_apply_total. 0 means etcd's default, 100ms.
	WarningApplyDuration time.Duration

	// Corruption checks (corrupt.go): InitialCorruptCheck compares this
	// member's hash with its peers' before it serves clients;
	// CorruptCheckTime > 0 runs the leader's periodic check;
	// CompactHashCheck runs the leader's compact hash check every
	// CompactHashCheckTime (0: etcd's 1 minute).
	InitialCorruptCheck  bool
	CorruptCheckTime     time.Duration
	CompactHashCheck     bool
	CompactHashCheckTime time.Duration

	// WALDir is --wal-dir: the Raft log in a dedicated directory instead
	// of DataDir/member/wal. MaxSnapshotFiles is how many snapshot files
	// to keep (--max-snapshots): 0 etcd's default of 5, negative all
	// (the flag's 0). UnsafeNoFsync is --unsafe-no-fsync (tests only).
	WALDir           string
	MaxSnapshotFiles int
	// MaxWALFiles is --max-wals: WAL files kept, released ones included
	// (0: etcd's default of 5, negative: all, the flag's 0).
	MaxWALFiles   int
	UnsafeNoFsync bool
	// ForceNewCluster is --force-new-cluster: on a restart, the other
	// members are removed through conf changes committed locally, and
	// this member goes on alone with its data.
	ForceNewCluster bool

	// Backend is the storage engine, opened by the caller; the server owns
	// it from here on and closes it on Stop.
	Backend kvstore.Backend
	// Auth configures authentication (--auth-token, --auth-token-ttl,
	// --bcrypt-cost, --client-cert-auth); its Logger and WaitApplied are
	// the server's.
	Auth   auth.Options
	Logger *slog.Logger
	// Metrics receives the server's collectors; nil disables them.
	Metrics prometheus.Registerer
	// PeerTLS, when set, secures every connection this member opens to a
	// peer: raft traffic, snapshots, forwarded requests and the member
	// list fetched when joining (--peer-cert-file, ...). Nil: http only.
	PeerTLS transport.ClientTLS
}

// Server is one MetaStore member: it turns client requests into Raft
// proposals, applies committed entries to the MVCC store, and answers reads.
type Server struct {
	cfg     Config
	log     *slog.Logger
	id      uint64
	cluster *membership.Cluster
	kv      *kvstore.Store
	node    *raftnode.Node
	applier *applier
	leases  *memberLeases
	hub     *watch.Hub  // delivers committed events to watchers
	auth    *auth.Store // users, roles, tokens; replicated in the store's auth bucket
	applied appliedIndex
	// transport carries raft traffic and forwarded requests to the other
	// members; peers is what it has been told about them (apply goroutine).
	transport *transport.Transport
	peers     *peerSet
	learner   atomic.Bool    // this member is a learner (as of the last change)
	metrics   *serverMetrics // the etcd_server_* series of this layer (metrics.go)

	alarms *alarmStore  // active alarms, replicated (alarm.go)
	quota  backendQuota // --quota-backend-bytes
	ops    *opsMetrics  // quota and alarm series
	// compactor is the auto-compaction loop, nil without one; it runs
	// from New to stop and proposes only while this member leads.
	compactor *compactor.Compactor
	// corruption runs the corruption checks (corrupt.go).
	corruption *corruptionChecker
	// defragLogEvery paces Defragment's progress lines
	// (defragProgressInterval; tests shorten it).
	defragLogEvery time.Duration

	wait       *waitRegistry
	reqIDs     *requestIDs
	reqTimeout time.Duration

	readyc      chan struct{} // closed once this member published itself
	stopping    chan struct{} // closed when Stop begins
	done        chan struct{} // closed when Stop has finished
	stopOnce    sync.Once
	removedOnce sync.Once
	stoppedWG   sync.WaitGroup
	// images counts the snapshot images (Snapshot) not yet released:
	// stop closes the store only once all are, since each holds a read
	// view of it. imagesClosed, set by stop under imagesMu, refuses new
	// ones, so images.Add never races images.Wait.
	imagesMu     sync.Mutex
	imagesClosed bool
	images       sync.WaitGroup
	errMu        sync.Mutex
	err          error // why the member stopped on its own (Err)
}

// New starts a member: it opens (or creates) its Raft log, recovers its
// state, and begins to take part in the cluster. Client requests are
// accepted once Ready is closed.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Backend == nil {
		return nil, errors.New("server: no storage backend")
	}
	memberDir := filepath.Join(cfg.DataDir, "member")
	if err := os.MkdirAll(memberDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: create data dir %s: %w", memberDir, err)
	}
	if err := removeStaleSnapshotImages(cfg.DataDir); err != nil {
		return nil, err
	}
	who, err := resolveIdentity(cfg, memberDir, peerHTTPClient(cfg.PeerTLS, fetchMembersTimeout))
	if err != nil {
		return nil, err
	}
	memberID, clusterID := who.memberID, who.clusterID
	tr, err := transport.New(transport.Config{
		ID:        memberID,
		ClusterID: clusterID,
		Logger:    cfg.Logger,
		Metrics:   cfg.Metrics,
		TLS:       cfg.PeerTLS,
	})
	if err != nil {
		return nil, fmt.Errorf("server: create peer transport: %w", err)
	}

	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger.With("member-id", fmt.Sprintf("%x", memberID)),
		id:         memberID,
		cluster:    membership.New(memberID, clusterID),
		wait:       newWaitRegistry(),
		reqIDs:     newRequestIDs(memberID, time.Now()),
		reqTimeout: 5*time.Second + 2*time.Duration(cfg.ElectionTicks)*cfg.TickInterval,
		readyc:     make(chan struct{}),
		stopping:   make(chan struct{}),
		done:       make(chan struct{}),
		transport:  tr,
		peers:      newPeerSet(memberID),
		alarms:     newAlarmStore(),

		defragLogEvery: defragProgressInterval,
	}
	s.corruption = newCorruptionChecker(s)
	if s.metrics, err = newServerMetrics(s, cfg.Metrics); err != nil {
		tr.Stop()
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			tr.Stop() // raftnode stops it once it owns it
		}
	}()
	leases, err := newMemberLeases(s, cfg)
	if err != nil {
		return nil, err
	}
	leases.forwarder = peerForwarder{s: s}
	s.leases = leases
	kv, err := kvstore.Open(cfg.Backend, kvstore.Options{
		Logger:  cfg.Logger,
		Metrics: cfg.Metrics,
		Leases:  leases.lessor,
		// Runs on the apply goroutine after each commit; Publish never
		// blocks. s.hub is set below, before anything can commit.
		OnCommit: func(events []mvccpb.Event) { s.hub.Publish(s.kv.Rev(), events) },
	})
	if err != nil {
		return nil, fmt.Errorf("server: open store: %w", err)
	}
	s.kv = kv
	if cfg.UnsafeNoFsync {
		s.log.Warn("--unsafe-no-fsync is set: the WAL and snapshot files are never fsynced; a crash or power loss loses acknowledged writes (for tests only)")
	}
	s.quota = newBackendQuota(cfg.QuotaBackendBytes, kv.Size, cfg.Logger)
	s.ops = newOpsMetrics(cfg.Metrics, cfg.Logger)
	s.ops.quotaBytes.Set(float64(s.quota.limit))
	if err := s.alarms.load(kv); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.ops.alarmsChanged(s.alarms.get(pb.AlarmType_NONE))
	authOpts := cfg.Auth
	authOpts.Logger = cfg.Logger.With("component", "auth")
	authOpts.WaitApplied = s.applied.wait
	if s.auth, err = auth.New(kv, authOpts); err != nil {
		return nil, fmt.Errorf("server: open auth store: %w", err)
	}
	defer func() {
		if !started {
			s.auth.Close()
		}
	}()
	applied, _ := kv.ConsistentIndex()
	s.applied.advance(applied)
	hub, err := watch.NewHub(kv, watch.Options{
		Logger:                 cfg.Logger.With("component", "watch"),
		Metrics:                cfg.Metrics,
		ErrCompacted:           kvstore.ErrCompacted,
		ProgressNotifyInterval: cfg.WatchProgressNotifyInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("server: start watch hub: %w", err)
	}
	s.hub = hub
	if err := leases.lessor.Recover(kv); err != nil {
		return nil, fmt.Errorf("server: load leases: %w", err)
	}
	if err := s.cluster.Load(kv); err != nil {
		return nil, fmt.Errorf("server: load member list: %w", err)
	}
	if s.cluster.IsRemoved(memberID) {
		return nil, fmt.Errorf("server: member %x: %w", memberID, ErrRemoved)
	}
	s.peers.seed(s.log, tr, who.peers)
	s.peers.sync(s.log, tr, s.cluster.Members(), s.cluster.IsRemoved)
	s.learner.Store(s.cluster.IsLearner(memberID))
	if err := s.registerForwardHandlers(); err != nil {
		return nil, err
	}
	s.applier = newApplier(s)
	if s.compactor, err = s.newAutoCompactor(); err != nil {
		return nil, err
	}

	node, err := raftnode.Start(raftnode.Config{
		ID:                         memberID,
		ClusterID:                  clusterID,
		Peers:                      who.bootstrap,
		Join:                       who.join,
		DataDir:                    memberDir,
		WALDir:                     cfg.WALDir,
		MaxSnapshotFiles:           cfg.MaxSnapshotFiles,
		MaxWALFiles:                cmp.Or(cfg.MaxWALFiles, defaultMaxWALFiles),
		UnsafeNoFsync:              cfg.UnsafeNoFsync,
		ForceNewCluster:            cfg.ForceNewCluster,
		TickInterval:               cfg.TickInterval,
		ElectionTicks:              cfg.ElectionTicks,
		HeartbeatTicks:             1,
		SnapshotCount:              cfg.SnapshotCount,
		SnapshotCatchUpEntries:     snapshotCatchUpEntries(cfg.SnapshotCount, cfg.SnapshotCatchUpEntries),
		DisablePreVote:             cfg.DisablePreVote,
		DisableElectionTickAdvance: cfg.DisableElectionTickAdvance,
		MaxSizePerMsg:              1 << 20,
		MaxInflightMsgs:            512,
		Logger:                     cfg.Logger,
		Metrics:                    cfg.Metrics,
		OnLeaderChange:             s.leaderChanged,
		Transport:                  tr,
	}, s.applier)
	if err != nil {
		return nil, fmt.Errorf("server: start raft: %w", err)
	}
	started = true
	s.node = node
	tr.Attach(node, node.Snapshots)
	if cfg.InitialCorruptCheck && who.bootstrap == nil && !who.join {
		// A restarting member only (etcd: memberInitialized): compare
		// with the peers before serving anything.
		if err := s.initialCorruptCheck(); err != nil {
			node.Stop()
			return nil, fmt.Errorf("server: checkInitialHashKV failed: %w", err)
		}
	}
	if err := leases.lessor.Start(); err != nil {
		node.Stop()
		return nil, fmt.Errorf("server: start lessor: %w", err)
	}

	if s.compactor != nil {
		s.compactor.Run()
	}
	s.startCorruptionMonitors()
	s.stoppedWG.Add(2)
	go s.publish()
	go s.watchNode()
	return s, nil
}

// watchNode stops the member when its raft node stops on its own (a
// failed disk write): it can no longer take part in the cluster.
func (s *Server) watchNode() {
	defer s.stoppedWG.Done()
	select {
	case <-s.node.Done():
		select {
		case <-s.stopping:
		default:
			s.fatal("raft node stopped", s.node.Err())
		}
	case <-s.stopping:
	}
}

// snapshotCatchUpEntries is how many entries stay in the log behind a
// snapshot so that a slightly lagging follower catches up from the log
// rather than by a whole snapshot: --snapshot-catchup-entries (etcd keeps
// 5000 by default), at most half the snapshot count when defaulted.
func snapshotCatchUpEntries(snapshotCount, configured uint64) uint64 {
	if configured != 0 {
		return configured
	}
	const etcdDefault = 5000
	if snapshotCount/2 < etcdDefault {
		return snapshotCount / 2
	}
	return etcdDefault
}

func sameURLs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// publish records this member's name and client URLs in the replicated
// member list, retrying until it succeeds or the server stops; the member
// is ready for clients once it has (as etcd's publishV3).
func (s *Server) publish() {
	defer s.stoppedWG.Done()
	req := &pb.InternalRaftRequest{ClusterMemberAttrSet: &membershippb.ClusterMemberAttrSetRequest{
		Member_ID:        s.id,
		MemberAttributes: &membershippb.Attributes{Name: s.cfg.Name, ClientUrls: s.cfg.ClientURLs},
	}}
	for {
		select {
		case <-s.stopping:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.reqTimeout)
		_, err := s.propose(ctx, req)
		cancel()
		if err == nil {
			s.log.Info("published local member to cluster through raft", "name", s.cfg.Name, "client-urls", s.cfg.ClientURLs)
			close(s.readyc)
			return
		}
		s.log.Warn("failed to publish local member to cluster through raft", "error", err)
	}
}

// Ready is closed once the member serves clients.
func (s *Server) Ready() <-chan struct{} { return s.readyc }

// Stop shuts the member down gracefully: a leader first hands leadership
// to another voter, then no new proposals are accepted, the apply in
// progress finishes, the WAL is closed cleanly, and the backend is closed.
// It is safe to call more than once.
func (s *Server) Stop() {
	s.transferLeadershipOnStop()
	s.stop()
}

// stop shuts the member down without handing over leadership first (after
// a fatal error, or once removed from the cluster).
func (s *Server) stop() {
	s.stopOnce.Do(func() {
		defer close(s.done)
		close(s.stopping)
		if s.compactor != nil {
			s.compactor.Stop()
		}
		s.leases.lessor.Stop()
		s.node.Stop()
		s.hub.Close()
		s.auth.Close()
		s.stoppedWG.Wait()
		// A snapshot being sent notices stopping at its next write and
		// is released by its handler.
		s.imagesMu.Lock()
		s.imagesClosed = true
		s.imagesMu.Unlock()
		s.images.Wait()
		// The store holds a read view of the backend; release it first.
		if err := s.kv.Close(); err != nil {
			s.log.Error("close store", "error", err)
		}
		if err := s.cfg.Backend.Close(); err != nil {
			s.log.Error("close backend", "error", err)
		}
		s.log.Info("stopped")
	})
}

// Fatal reports an unrecoverable error (the member's state would diverge);
// the member stops, Done closes and Err says why.
func (s *Server) fatal(msg string, err error) {
	s.log.Error(msg, "error", err)
	s.setErr(fmt.Errorf("%s: %w", msg, err))
	go s.stop()
}

// Done is closed once the member has stopped, by Stop or on its own (see
// Err).
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is why the member stopped on its own: a fatal error, or ErrRemoved.
// It is nil while running and after a plain Stop.
func (s *Server) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

func (s *Server) setErr(err error) {
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
}

// ID is this member's ID.
func (s *Server) ID() uint64 { return s.id }

// ClusterID is the cluster's ID.
func (s *Server) ClusterID() uint64 { return s.cluster.ID() }

// Term is the current Raft term.
func (s *Server) Term() uint64 { return s.node.Status().Term }

// Rev is the store's current revision.
func (s *Server) Rev() int64 { return s.kv.Rev() }

// Members lists the cluster's members ordered by ID.
func (s *Server) Members() []*membershippb.Member { return s.cluster.Members() }

// Status is the member's view of itself for Maintenance.Status.
type Status struct {
	raftnode.Status
	DBSize      int64
	DBSizeInUse int64
	IsLearner   bool
	// QuotaBytes is the backend quota in force (etcd reports its default
	// when the flag is 0, and the negative value when disabled).
	QuotaBytes int64
}

// Status reports Raft and storage figures.
func (s *Server) Status() Status {
	return Status{
		Status:      s.node.Status(),
		DBSize:      s.kv.Size(),
		DBSizeInUse: s.kv.SizeInUse(),
		IsLearner:   s.cluster.IsLearner(s.id),
		QuotaBytes:  s.quota.limit,
	}
}

// WatchHub is the member's watch hub, for the Watch service.
func (s *Server) WatchHub() *watch.Hub { return s.hub }

// engineCompactor is implemented by storage engines that can reclaim the space
// of deleted data on demand (internal/rocksdb).
type engineCompactor interface{ Compact() error }

// Defragment reclaims the engine's free space, as etcd's defragment does
// for bbolt. It runs beside apply: RocksDB compacts concurrently with
// writes. Engines without the notion have nothing to do.
func (s *Server) Defragment(ctx context.Context) error {
	start := time.Now()
	c, ok := s.cfg.Backend.(engineCompactor)
	if !ok {
		// The memory engine holds no free space: done at once.
		s.metrics.defragSeconds.Observe(time.Since(start).Seconds())
		return nil
	}
	sizeBefore, inUseBefore := s.kv.Size(), s.kv.SizeInUse()
	s.log.Info("starting defragment", "current-db-size-bytes", sizeBefore, "current-db-size-in-use-bytes", inUseBefore)
	done := make(chan error, 1)
	s.metrics.defragInflight.Inc()
	go func() {
		// Timed to the end, even when the caller stops waiting.
		err := c.Compact()
		s.metrics.defragInflight.Dec()
		s.metrics.defragSeconds.Observe(time.Since(start).Seconds())
		done <- err
	}()
	// The engine reports no fraction done: a long defragmentation logs
	// how long it has run and where the size stands, so an operator sees
	// it moving.
	progress := time.NewTicker(s.defragLogEvery)
	defer progress.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				s.log.Warn("failed to defragment", "error", err)
				return fmt.Errorf("defragment: %w", err)
			}
			s.log.Info("finished defragment", "took", time.Since(start),
				"db-size-bytes-before", sizeBefore, "db-size-bytes-after", s.kv.Size(),
				"db-size-in-use-bytes-after", s.kv.SizeInUse())
			return nil
		case <-progress.C:
			s.log.Info("defragment in progress", "elapsed", time.Since(start).Round(time.Second),
				"db-size-bytes-before", sizeBefore, "db-size-bytes-now", s.kv.Size())
		case <-ctx.Done():
			s.log.Info("defragment goes on after its caller stopped waiting", "elapsed", time.Since(start).Round(time.Second))
			return ctx.Err()
		}
	}
}

// defaultMaxWALFiles is etcd's default --max-wals.
const defaultMaxWALFiles = 5

// defragProgressInterval is how often a running defragmentation logs.
const defragProgressInterval = 5 * time.Second
