package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"go.etcd.io/raft/v3"

	"github.com/metastore-io/metastore/internal/auth"
	"github.com/metastore-io/metastore/internal/cluster/corruption"
	"github.com/metastore-io/metastore/internal/cluster/forward"
	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/cluster/transport"
	"github.com/metastore-io/metastore/internal/cluster/version"
	"github.com/metastore-io/metastore/internal/host/memlimit"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/kvstore/compactor"
	"github.com/metastore-io/metastore/internal/raftnode"
	"github.com/metastore-io/metastore/internal/statemachine"
	"github.com/metastore-io/metastore/internal/statemachine/wait"
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
	// PeerLocalAddr, if set, is the IP address the member's connections
	// to its peers are dialled from (etcd's SetMemberLocalAddr).
	PeerLocalAddr string

	SnapshotCount   uint64
	MaxRequestBytes uint
	MaxTxnOps       uint
	// CompactionBatchLimit is --compaction-batch-limit: about how many
	// old revisions a compaction deletes per apply commit (kvstore's
	// Options.CompactionStep; 0 or less: etcd's default of 1000).
	CompactionBatchLimit int
	TickInterval         time.Duration // --heartbeat-interval
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
	// 2 GiB, negative no quota (statemachine.Quota).
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

	// PeerListeners are served the peer API from New on. The server owns
	// them from New on, also when New fails, and closes them on Stop.
	// Client listeners are not the server's: the composition root
	// (internal/member) serves etcd's client API over the member.
	PeerListeners []net.Listener
	// ClusterVersion is the version a leader records when none is (etcd's
	// ClusterVersionSet entry of a new cluster): the version of etcd's API
	// the client services speak (etcdcompat.EtcdClusterVersion).
	ClusterVersion string
	// ServerVersion is the etcd server version this member reports
	// itself as (etcdcompat.EtcdServerVersion): the members' lowest,
	// for the cluster version monitor, as MetaStore's members do not ask
	// each other theirs.
	ServerVersion string
	// SendLimit is the largest message a client is sent
	// (etcdcompat.Config.SendLimit): the store refuses a read whose
	// response would not fit in it. 0 is gRPC's own limit, 2 GiB.
	SendLimit int
	// BeforeStop, if set, is called once when the member begins to stop,
	// by Stop or on its own, before any of its parts stops: the owner of
	// the client services drains them there, so that requests in flight
	// still reach a running member. Watch streams have ended by then.
	BeforeStop func()

	// Memory divides the process's memory limit (GOMEMLIMIT) among what
	// the member holds for clients: a read whose response would take
	// more than Memory.Response() is refused, the in-memory raft log is
	// held to Memory.RaftLog() (see internal/host/memlimit).
	// The zero Budget bounds nothing beyond etcd's own limits.
	Memory memlimit.Budget
}

// Server is one MetaStore member: it turns client requests into Raft
// proposals, applies committed entries to the MVCC store, and answers reads.
//
// New builds it in one direction, each part from the ones before it
// (open the store, build the state machine, start raft, start serving),
// and shutdown stops them in reverse; every goroutine, listener and the
// transport are started by the Server and stopped and waited for by it
// (lifecycle.go).
type Server struct {
	cfg     Config
	log     *slog.Logger
	id      uint64
	cluster *membership.Cluster
	kv      *kvstore.Store
	node    *raftnode.Node
	leases  *memberLeases
	// renewals batches the keep-alives this member forwards to the leader.
	renewals *forward.RenewBatcher
	hub      *watch.Hub // delivers committed events to watchers
	// notices are what apply leaves for the member to do through raft
	// (the loop in notices.go acts on them).
	notices *statemachine.Notices
	auth    *auth.Store            // users, roles, tokens; replicated in the store's auth bucket
	applied statemachine.Watermark // the applied raft index
	// compacted is the store's finished compaction revision (the last
	// one whose old revisions are all deleted), for physical compactions.
	compacted statemachine.Watermark
	// transport carries raft traffic and forwarded requests to the other
	// members; peers is what it has been told about them (apply goroutine).
	transport *transport.Transport
	peers     *transport.PeerSet
	learner   atomic.Bool    // this member is a learner (as of the last change)
	metrics   *serverMetrics // the etcd_server_* series of this layer (metrics.go)

	alarms *statemachine.Alarms // active alarms, replicated
	quota  statemachine.Quota   // --quota-backend-bytes
	ops    *opsMetrics          // quota and alarm series
	// compactor is the auto-compaction loop, nil without one; it runs
	// from New to stop and proposes only while this member leads.
	compactor *compactor.Compactor
	// versions keeps the cluster version and the downgrade job.
	versions *version.Keeper
	// corruption runs the corruption checks (corrupt.go).
	corruption *corruption.Checker
	// defragLogEvery paces Defragment's progress lines
	// (defragProgressInterval; tests shorten it).
	defragLogEvery time.Duration

	// peerServers serve the peer API.
	peerServers []*http.Server

	wait       *wait.Registry
	reqIDs     *wait.IDs
	reqTimeout time.Duration

	readyc      chan struct{} // closed once this member published itself
	stopping    chan struct{} // closed when shutdown begins
	done        chan struct{} // closed when shutdown has finished
	failed      chan struct{} // closed by fatal
	removed     chan struct{} // closed once this member applied its removal
	stopOnce    sync.Once
	beforeStop  sync.Once // runs cfg.BeforeStop
	failOnce    sync.Once
	removedOnce sync.Once
	// supervisor is supervise (lifecycle.go) and the wait registry's
	// expiry loop (package wait); serving the goroutines that serve listeners,
	// publish the member and monitor corruption; users the work beside
	// apply that holds the store.
	supervisor sync.WaitGroup
	serving    sync.WaitGroup
	users      storeUsers
	errMu      sync.Mutex
	err        error // why the member stopped on its own (Err)
}

// New starts a member: it opens (or creates) its Raft log, recovers its
// state, begins to take part in the cluster and serves its peer
// listeners; Ready closes once it has published itself and may serve
// clients. ctx bounds the start (fetching the member list when joining).
func New(ctx context.Context, cfg Config) (*Server, error) {
	s, who, err := newServer(ctx, cfg)
	if err != nil {
		closeListeners(cfg)
		return nil, err
	}
	if err := s.openStore(); err != nil {
		s.closeStore()
		closeListeners(cfg)
		return nil, err
	}
	if err := s.startRaft(who); err != nil {
		s.closeStore()
		closeListeners(cfg)
		return nil, err
	}
	if err := s.startServing(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// newServer checks cfg and decides the member's identity
// (cluster_bootstrap.go), which startRaft starts raft with.
func newServer(ctx context.Context, cfg Config) (*Server, identity, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Backend == nil {
		return nil, identity{}, errors.New("server: no storage backend")
	}
	for _, v := range []string{cfg.ClusterVersion, cfg.ServerVersion} {
		if strings.Count(v, ".") != 2 {
			return nil, identity{}, fmt.Errorf("server: version %q is not major.minor.patch", v)
		}
	}
	memberDir := memberDataDir(cfg.DataDir)
	if err := os.MkdirAll(memberDir, 0o700); err != nil {
		return nil, identity{}, fmt.Errorf("server: create data dir %s: %w", memberDir, err)
	}
	if err := removeStaleSnapshotImages(cfg.DataDir); err != nil {
		return nil, identity{}, err
	}
	who, err := resolveIdentity(ctx, cfg, memberDir, transport.PeerHTTPClient(cfg.PeerTLS, fetchMembersTimeout))
	if err != nil {
		return nil, identity{}, err
	}
	s := &Server{
		cfg:        cfg,
		log:        cfg.Logger.With("member-id", fmt.Sprintf("%x", who.memberID)),
		id:         who.memberID,
		cluster:    membership.New(who.memberID, who.clusterID),
		wait:       wait.New(),
		reqIDs:     wait.NewIDs(who.memberID, time.Now()),
		reqTimeout: membererr.RequestTimeout(time.Duration(cfg.ElectionTicks) * cfg.TickInterval),
		readyc:     make(chan struct{}),
		stopping:   make(chan struct{}),
		done:       make(chan struct{}),
		failed:     make(chan struct{}),
		removed:    make(chan struct{}),
		peers:      transport.NewPeerSet(who.memberID),
		alarms:     statemachine.NewAlarms(),
		notices:    statemachine.NewNotices(),

		defragLogEvery: defragProgressInterval,
	}
	if s.metrics, err = newServerMetrics(cfg.Metrics, cfg.WarningApplyDuration, s.id, &s.learner, s.cluster); err != nil {
		return nil, identity{}, err
	}
	return s, who, nil
}

// sendLimit is Config.SendLimit with 0 meaning gRPC's limit.
func sendLimit(configured int) int {
	if configured <= 0 {
		return math.MaxInt32
	}
	return configured
}

// memberDataDir is the member's folder in its data dir: raftnode's files
// (Config.WALDir aside), and the client snapshot images being sent.
func memberDataDir(dataDir string) string { return filepath.Join(dataDir, "member") }

// openStore opens the MVCC store over the backend and loads what the
// member keeps in it: leases, alarms, users and roles, the member list;
// the watch hub continues from its revision.
func (s *Server) openStore() error {
	cfg := s.cfg
	leases, err := newMemberLeases(cfg, s.log, s.id, s.reqTimeout, s.stopping, s)
	if err != nil {
		return err
	}
	s.leases = leases
	s.kv, err = kvstore.Open(cfg.Backend, kvstore.Options{Logger: cfg.Logger, Metrics: cfg.Metrics, Leases: leases.lessor,
		MaxResponseBytes:  int64(sendLimit(cfg.SendLimit)) - kvstore.ResponseOverheadBytes,
		MaxResponseMemory: cfg.Memory.Response(),
		CompactionStep:    max(cfg.CompactionBatchLimit, 0)})
	if err != nil {
		return fmt.Errorf("server: open store: %w", err)
	}
	if cfg.UnsafeNoFsync {
		s.log.Warn("--unsafe-no-fsync is set: the WAL and snapshot files are never fsynced; a crash or power loss loses acknowledged writes (for tests only)")
	}
	s.quota = statemachine.NewQuota(cfg.QuotaBackendBytes, s.kv.Size, cfg.Logger)
	s.ops = newOpsMetrics(cfg.Metrics, cfg.Logger)
	s.ops.quotaBytes.Set(float64(s.quota.Limit()))
	if err := s.alarms.Load(s.kv); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.ops.alarmsChanged(s.alarms.Get(pb.AlarmType_NONE))
	authOpts := cfg.Auth
	authOpts.Logger = cfg.Logger.With("component", "auth")
	authOpts.WaitApplied = s.applied.Wait
	if s.auth, err = auth.New(s.kv, authOpts); err != nil {
		return fmt.Errorf("server: open auth store: %w", err)
	}
	if err := registerAuthRevision(cfg.Metrics, s.auth); err != nil {
		return err
	}
	applied, _ := s.kv.ConsistentIndex()
	s.applied.Advance(applied)
	statemachine.NoteCompaction(s.kv, &s.compacted)
	s.hub, err = watch.NewHub(s.kv, watch.Options{
		Logger:                 cfg.Logger.With("component", "watch"),
		Metrics:                cfg.Metrics,
		ErrCompacted:           kvstore.ErrCompacted,
		ProgressNotifyInterval: cfg.WatchProgressNotifyInterval,
	})
	if err != nil {
		return fmt.Errorf("server: start watch hub: %w", err)
	}
	if err := leases.lessor.Recover(s.kv); err != nil {
		return fmt.Errorf("server: load leases: %w", err)
	}
	if err := s.cluster.Load(s.kv); err != nil {
		return fmt.Errorf("server: load member list: %w", err)
	}
	if s.cluster.IsRemoved(s.id) {
		return fmt.Errorf("server: member %x: %w", s.id, ErrRemoved)
	}
	return nil
}

// closeStore undoes openStore (and startRaft's transport) after a failed
// start; the caller closes the backend.
func (s *Server) closeStore() {
	if s.transport != nil {
		s.transport.Stop()
	}
	if s.hub != nil {
		s.hub.Close()
	}
	if s.auth != nil {
		s.auth.Close()
	}
	if s.kv != nil {
		if err := s.kv.Close(); err != nil {
			s.log.Error("close store", "error", err)
		}
	}
}

// startRaft creates the peer transport, which the raft node attaches
// itself to before raft runs, and starts the node with the replicated state machine
// (internal/statemachine); then the corruption checker, which reads through raft.
func (s *Server) startRaft(who identity) error {
	cfg := s.cfg
	tr, err := transport.New(transport.Config{
		ID:        who.memberID,
		ClusterID: who.clusterID,
		Logger:    cfg.Logger,
		Metrics:   cfg.Metrics,
		TLS:       cfg.PeerTLS,
		LocalURLs: cfg.PeerURLs,
		LocalAddr: cfg.PeerLocalAddr,
		// A member removed while it could not hear of it learns it from
		// the first peer that refuses it, and stops, as etcd does.
		OnRemoved: s.removedFromCluster,
	})
	if err != nil {
		return fmt.Errorf("server: create peer transport: %w", err)
	}
	s.transport = tr
	s.renewals = forward.NewRenewBatcher(tr, s.users.spawn, s.leases.electionTimeout, s.stopping)
	s.peers.Seed(s.log, tr, who.peers)
	s.peers.Sync(s.log, tr, s.cluster.Members(), s.cluster.IsRemoved)
	s.learner.Store(s.cluster.IsLearner(s.id))
	if err := s.registerForwardHandlers(); err != nil {
		return err
	}
	sm := s.stateMachine()
	if s.compactor, err = s.newAutoCompactor(); err != nil {
		return err
	}
	s.node, err = raftnode.Start(raftnode.Config{
		ID:                         who.memberID,
		ClusterID:                  who.clusterID,
		Peers:                      who.bootstrap,
		Join:                       who.join,
		DataDir:                    memberDataDir(cfg.DataDir),
		WALDir:                     cfg.WALDir,
		MaxSnapshotFiles:           cfg.MaxSnapshotFiles,
		MaxWALFiles:                cmp.Or(cfg.MaxWALFiles, defaultMaxWALFiles),
		UnsafeNoFsync:              cfg.UnsafeNoFsync,
		ForceNewCluster:            cfg.ForceNewCluster,
		TickInterval:               cfg.TickInterval,
		ElectionTicks:              cfg.ElectionTicks,
		HeartbeatTicks:             1,
		ReadTimeout:                s.reqTimeout,
		SnapshotCount:              cfg.SnapshotCount,
		SnapshotCatchUpEntries:     snapshotCatchUpEntries(cfg.SnapshotCount, cfg.SnapshotCatchUpEntries),
		MaxLogBytes:                uint64(cfg.Memory.RaftLog()),
		DisablePreVote:             cfg.DisablePreVote,
		DisableElectionTickAdvance: cfg.DisableElectionTickAdvance,
		MaxSizePerMsg:              1 << 20,
		MaxInflightMsgs:            512,
		Logger:                     cfg.Logger,
		Metrics:                    cfg.Metrics,
		OnLeaderChange:             s.leaderChanged,
		Transport:                  tr,
	}, sm)
	if err != nil {
		return fmt.Errorf("server: start raft: %w", err)
	}
	s.corruption = newCorruptionChecker(s)
	s.versions = version.New(versionMember{s}, s.log, s.cfg.ClusterVersion, s.cfg.ServerVersion, s.reqTimeout, s.stopping)
	if cfg.InitialCorruptCheck && who.bootstrap == nil && !who.join {
		// A restarting member only (etcd: memberInitialized): compare
		// with the peers before serving anything.
		if err := s.initialCorruptCheck(); err != nil {
			s.node.Stop()
			return fmt.Errorf("server: checkInitialHashKV failed: %w", err)
		}
	}
	return nil
}

// stateMachine builds the replicated state machine over the parts it
// applies to, all built by now; the hooks reach only parts built before
// it.
func (s *Server) stateMachine() *statemachine.StateMachine {
	return statemachine.New(statemachine.Deps{
		Log:         s.log,
		KV:          s.kv,
		Lessor:      s.leases.lessor,
		Cluster:     s.cluster,
		Auth:        s.auth,
		Alarms:      s.alarms,
		Quota:       s.quota,
		Hub:         s.hub,
		Waiter:      s.wait,
		Notices:     s.notices,
		Applied:     &s.applied,
		Compacted:   &s.compacted,
		LeaderEntry: s.leases.leaderEntryApplied,
		ObserveApply: func(req *pb.InternalRaftRequest, err error, took time.Duration) {
			s.metrics.observeApply(s.log, statemachine.OpOf(req), err, took)
		},
		AlarmsChanged: s.ops.alarmsChanged,
		PeersChanged:  s.syncPeers,
		Fatal:         s.fatal,
	})
}

// startServing starts the notice loop, the lessor, the auto-compactor,
// the corruption monitors and the cluster version's, serves the peer
// listeners and publishes the member (Ready closes once it is
// published); supervise stops the member if it fails on its own.
func (s *Server) startServing() error {
	s.supervisor.Add(2)
	go s.supervise()
	s.serving.Add(1)
	go s.actOnApplyNotices()
	go func() {
		defer s.supervisor.Done()
		s.wait.ExpireLoop(s.stopping, s.node.Done())
	}()
	s.servePeers()
	if err := s.leases.lessor.Start(); err != nil {
		return fmt.Errorf("server: start lessor: %w", err)
	}
	if s.compactor != nil {
		s.compactor.Run()
	}
	s.startCorruptionMonitors()
	s.serving.Add(2)
	go s.monitorClusterVersion()
	go s.publishAttributes()
	return nil
}

// closeListeners closes the listeners of a member that failed to start.
func closeListeners(cfg Config) {
	for _, l := range cfg.PeerListeners {
		l.Close()
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

// publishAttributes records this member's name and client URLs in the replicated
// member list, retrying until it succeeds or the server stops; the member
// is ready for clients once it has (as etcd's publishV3).
func (s *Server) publishAttributes() {
	defer s.serving.Done()
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

// ID is this member's ID.
func (s *Server) ID() uint64 { return s.id }

// ClusterID is the cluster's ID.
func (s *Server) ClusterID() uint64 { return s.cluster.ID() }

// Term is the current Raft term.
func (s *Server) Term() uint64 { return s.node.Term() }

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
		QuotaBytes:  s.quota.Limit(),
	}
}

// RaftStatus is raft's own view of this member (/debug/vars).
func (s *Server) RaftStatus() raft.Status { return s.node.RaftStatus() }

// NewWatchStream opens a stream of the member's watch hub: one client
// watch stream's watchers and their events.
func (s *Server) NewWatchStream() *watch.Stream { return s.hub.NewStream() }

// defaultMaxWALFiles is etcd's default --max-wals.
const defaultMaxWALFiles = 5
