package lease

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// etcd's defaults.
const (
	defaultCheckpointInterval   = 5 * time.Minute
	defaultExpiredRetryInterval = 3 * time.Second
	defaultRevokeRate           = 1000
	defaultCheckpointRate       = 1000
	// maxCheckpointBatch is how many checkpoints one Raft entry carries.
	maxCheckpointBatch = 1000
	// revokeWorkers bounds the revoke proposals in flight (etcd's
	// maxPendingRevokes).
	revokeWorkers = 16
	// maxRevokeQueue caps the queue of leases waiting for a revoke worker
	// (normally two windows' worth), whatever the configured rate.
	maxRevokeQueue = 1 << 16
)

// forever is the expiry of a lease whose clock is not running (this lessor
// is not primary). It is larger than any real expiry.
const forever = time.Duration(math.MaxInt64)

// Proposer puts the primary's decisions through Raft. The server implements
// it; its proposals are applied like client requests, on every member.
type Proposer interface {
	// ConfirmLeadership reports whether this member is still the leader,
	// confirmed by a quorum (etcd's ensureLeadership). A deposed leader
	// that has not noticed yet must not revoke leases: its proposals could
	// still be forwarded to and committed by the new leader.
	ConfirmLeadership(ctx context.Context) bool
	// ProposeRevoke proposes LeaseRevoke{ID: id} and waits until applied.
	ProposeRevoke(ctx context.Context, id int64) error
	// ProposeCheckpoint proposes LeaseCheckpoint{Checkpoints: cps} and
	// waits until applied.
	ProposeCheckpoint(ctx context.Context, cps []*pb.LeaseCheckpoint) error
}

// Config configures a Lessor. Zero values take etcd's defaults.
type Config struct {
	Logger *slog.Logger // nil discards logs
	// Metrics receives the lease metrics; nil disables them.
	Metrics prometheus.Registerer
	// Clock is the lease clock; nil is the system clock.
	Clock Clock
	// Proposer is required by Start and by Renew of a checkpointed lease.
	Proposer Proposer
	// MinTTL is the shortest TTL NormalizeTTL lets a grant propose, in
	// seconds; etcd derives it from the election timeout (see MinTTL).
	MinTTL int64
	// CheckpointInterval is how often the primary records a long lease's
	// remaining TTL through Raft (etcd: 5 minutes). Negative disables
	// checkpoints.
	CheckpointInterval time.Duration
	// ExpiredRetryInterval is how long an expired lease handed to a revoke
	// waits before it is handed again if the revoke has not applied
	// (etcd: the request timeout).
	ExpiredRetryInterval time.Duration
	// RevokeRate is the most expired leases revoked per second (etcd: 1000).
	RevokeRate int
	// CheckpointRate is the most checkpoint entries proposed per second
	// (etcd: 1000).
	CheckpointRate int
}

// MinTTL is etcd's minimum lease TTL for an election timeout of
// electionTicks heartbeats: 1.5 election timeouts rounded up to whole
// seconds, so that a lease cannot expire while a new leader is elected.
func MinTTL(electionTicks int, heartbeat time.Duration) int64 {
	d := time.Duration(3*electionTicks/2) * heartbeat
	return int64(math.Ceil(d.Seconds()))
}

// leaseState is one lease. The first block is replicated state, changed
// only by apply; the second is the primary's clock, local to the leader.
type leaseState struct {
	id           int64
	ttl          int64 // granted TTL, seconds
	remainingTTL int64 // last checkpointed remaining TTL, seconds; 0 = unset
	keys         map[string]struct{}

	expiry    time.Duration // when it expires, on the lessor's monotonic scale; forever when not primary
	due       time.Duration // heap key: when the expiry loop looks at it next
	heapIndex int           // position in the expiry heap, -1 when absent
	revokec   chan struct{} // closed when the revoke applies; made on demand
}

// effectiveTTL is what a fresh clock starts from: the checkpointed remaining
// TTL if there is one, else the granted TTL.
func (ls *leaseState) effectiveTTL() int64 {
	if ls.remainingTTL > 0 {
		return ls.remainingTTL
	}
	return ls.ttl
}

// Lessor is the lease table of one member plus, while the member leads,
// the clock that expires leases (see doc.go).
type Lessor struct {
	cfg   Config
	log   *slog.Logger
	clock Clock
	epoch time.Time // zero of the monotonic scale expiries are kept on
	m     *metrics

	// mu guards the table and the clock's state: leases, pending,
	// recovering, primary, demotec, promotec, expiry and checkpoints.
	// Lock order: mu is a leaf. It is held only while those are read or
	// updated; nothing else is locked, no proposal is made, no store or
	// Config callback is called and no channel is waited on under it
	// (closing a lease's revokec is the one channel operation, and it
	// does not block). Proposals (revokes, checkpoints) are made after
	// Unlock, so an apply that takes mu never waits behind one.
	mu     sync.RWMutex
	leases map[int64]*leaseState
	// pending holds keys attached to leases without a record yet: while
	// the store rebuilds its index (Open, Restore) it reports leased keys
	// before Recover has read the lease records.
	pending    map[int64]map[string]struct{}
	recovering bool

	primary     bool
	demotec     chan struct{} // closed on Demote; nil when not primary
	promotec    chan struct{} // closed on Promote; replaced on Demote
	expiry      expiryHeap
	checkpoints checkpointQueue

	// Expiry loop (loop.go).
	kick      chan struct{}
	revokeq   chan int64
	queued    atomic.Int64 // expired leases handed to revoke workers, ever
	stopc     chan struct{}
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	stopOnce  sync.Once
}

// New returns an empty lessor that is not primary. Call Recover once the
// store is open before applying entries.
func New(cfg Config) (*Lessor, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = defaultCheckpointInterval
	}
	if cfg.ExpiredRetryInterval <= 0 {
		cfg.ExpiredRetryInterval = defaultExpiredRetryInterval
	}
	if cfg.RevokeRate <= 0 {
		cfg.RevokeRate = defaultRevokeRate
	}
	if cfg.CheckpointRate <= 0 {
		cfg.CheckpointRate = defaultCheckpointRate
	}
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	perWindow := revokesPerWindow(cfg.RevokeRate)
	return &Lessor{
		cfg:        cfg,
		log:        cfg.Logger,
		clock:      cfg.Clock,
		epoch:      cfg.Clock.Now(),
		m:          m,
		leases:     map[int64]*leaseState{},
		pending:    map[int64]map[string]struct{}{},
		recovering: true,
		promotec:   make(chan struct{}),
		kick:       make(chan struct{}, 1),
		revokeq:    make(chan int64, min(2*perWindow, maxRevokeQueue)),
		stopc:      make(chan struct{}),
	}, nil
}

// now is the clock's reading on the lessor's monotonic scale.
func (l *Lessor) now() time.Duration { return l.clock.Now().Sub(l.epoch) }

// NormalizeTTL is what a grant proposes for a requested TTL: raised to
// MinTTL as etcd does, or ErrLeaseTTLTooLarge. The proposer applies it
// before proposing so that the entry, not each member's configuration,
// decides the TTL.
func (l *Lessor) NormalizeTTL(ttl int64) (int64, error) {
	if ttl > MaxTTL {
		return 0, ErrLeaseTTLTooLarge
	}
	return max(ttl, l.cfg.MinTTL), nil
}

// LeaseExists reports whether lease id exists (kvstore.LeaseTable).
func (l *Lessor) LeaseExists(id int64) bool {
	l.mu.RLock()
	_, ok := l.leases[id]
	l.mu.RUnlock()
	return ok
}

// Attach records that key now carries lease id (kvstore.LeaseTable). The
// store calls it from apply, after LeaseExists, and while rebuilding its
// index on Open and Restore.
func (l *Lessor) Attach(id int64, key []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.leases[id]; ls != nil {
		if ls.keys == nil {
			ls.keys = map[string]struct{}{}
		}
		ls.keys[string(key)] = struct{}{}
		return
	}
	if !l.recovering {
		// The store checks LeaseExists before attaching in apply, so this
		// is a caller bug; ignoring it is the same on every member.
		l.log.Warn("ignoring attach to unknown lease", "lease-id", fmt.Sprintf("%016x", id), "key", string(key))
		return
	}
	keys := l.pending[id]
	if keys == nil {
		keys = map[string]struct{}{}
		l.pending[id] = keys
	}
	keys[string(key)] = struct{}{}
}

// Detach records that key no longer carries lease id (kvstore.LeaseTable).
func (l *Lessor) Detach(id int64, key []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.leases[id]; ls != nil {
		delete(ls.keys, string(key))
		return
	}
	if keys := l.pending[id]; keys != nil {
		delete(keys, string(key))
	}
}

// ApplyGrant applies a LeaseGrant entry: it creates lease id with ttl
// seconds and buffers its record into w. It returns the granted TTL.
func (l *Lessor) ApplyGrant(w AuxWriter, id, ttl int64) (int64, error) {
	if id == 0 {
		return 0, ErrLeaseNotFound
	}
	if ttl > MaxTTL {
		return 0, ErrLeaseTTLTooLarge
	}
	l.mu.Lock()
	if _, ok := l.leases[id]; ok {
		l.mu.Unlock()
		return 0, ErrLeaseExists
	}
	ls := &leaseState{id: id, ttl: ttl, expiry: forever, heapIndex: -1}
	l.leases[id] = ls
	primary := l.primary
	if primary {
		now := l.now()
		l.startClockLocked(ls, 0, now)
		l.scheduleCheckpointLocked(ls, now)
	}
	l.mu.Unlock()

	l.persist(w, ls.id, ls.ttl, 0)
	l.m.granted.Inc()
	l.m.ttls.Observe(float64(ttl))
	if primary {
		l.wake()
	}
	return ttl, nil
}

// KeyDeleter is the store as a revoke needs it.
type KeyDeleter interface {
	AuxWriter
	// DeleteKeys deletes keys (sorted ascending, distinct) in one write
	// that takes a single revision (none if nothing existed). Deleting a
	// leased key detaches it from its lease through the LeaseTable.
	DeleteKeys(keys [][]byte) error
}

// ApplyRevoke applies a LeaseRevoke entry: every key attached to lease id
// is deleted in one revision, in key order so every member writes the same
// batch, and the lease record is deleted in the same batch.
func (l *Lessor) ApplyRevoke(s KeyDeleter, id int64) error {
	l.mu.RLock()
	ls := l.leases[id]
	var keys [][]byte
	if ls != nil {
		keys = make([][]byte, 0, len(ls.keys))
		for k := range ls.keys {
			keys = append(keys, []byte(k))
		}
	}
	l.mu.RUnlock()
	if ls == nil {
		return ErrLeaseNotFound
	}
	slices.SortFunc(keys, func(a, b []byte) int { return cmp.Compare(string(a), string(b)) })

	// The store calls Detach for each key it deletes, so the lock must not
	// be held here.
	if err := s.DeleteKeys(keys); err != nil {
		return fmt.Errorf("revoke lease %016x: delete %d attached keys: %w", id, len(keys), err)
	}

	l.mu.Lock()
	delete(l.leases, id)
	l.expiry.Remove(ls)
	if ls.revokec != nil {
		close(ls.revokec)
	}
	l.mu.Unlock()

	s.DeleteAux(Bucket, recordKey(nil, id))
	l.m.revoked.Inc()
	return nil
}

// ApplyCheckpoint applies a LeaseCheckpoint entry: each named lease that
// still exists records its remaining TTL (0 clears it), persisted in w.
func (l *Lessor) ApplyCheckpoint(w AuxWriter, cps []*pb.LeaseCheckpoint) {
	for _, cp := range cps {
		l.mu.Lock()
		ls := l.leases[cp.ID]
		if ls == nil {
			l.mu.Unlock()
			continue
		}
		ls.remainingTTL = cp.Remaining_TTL
		if l.primary {
			l.scheduleCheckpointLocked(ls, l.now())
		}
		ttl := ls.ttl
		l.mu.Unlock()
		l.persist(w, cp.ID, ttl, cp.Remaining_TTL)
	}
}

func (l *Lessor) persist(w AuxWriter, id, ttl, remainingTTL int64) {
	w.PutAux(Bucket, recordKey(nil, id), AppendRecord(nil, Record{ID: id, TTL: ttl, RemainingTTL: remainingTTL}))
}

// Recover replaces the lease table with the records in r, and gives each
// lease the keys the store attached while rebuilding its index. Call it
// after kvstore.Open; Restore calls it after a snapshot is installed.
func (l *Lessor) Recover(r AuxReader) error {
	leases := map[int64]*leaseState{}
	var decodeErr error
	err := r.AscendAux(Bucket, func(key, value []byte) bool {
		rec, err := decodeKeyedRecord(key, value)
		if err != nil {
			decodeErr = err
			return false
		}
		leases[rec.ID] = &leaseState{id: rec.ID, ttl: rec.TTL, remainingTTL: rec.RemainingTTL, expiry: forever, heapIndex: -1}
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return fmt.Errorf("lease: recover lease records: %w", err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for id, keys := range l.pending {
		if ls := leases[id]; ls != nil {
			ls.keys = keys
			delete(l.pending, id)
		}
	}
	if len(l.pending) > 0 {
		// Keys naming a lease without a record: the store and the lease
		// records disagree. They stay unleased, identically on every
		// member recovering the same image.
		orphans := 0
		for _, keys := range l.pending {
			orphans += len(keys)
		}
		l.log.Warn("keys attached to leases that do not exist", "leases", len(l.pending), "keys", orphans)
	}
	for id, old := range l.leases {
		if old.revokec != nil && leases[id] == nil {
			close(old.revokec)
		}
	}
	l.leases = leases
	l.pending = map[int64]map[string]struct{}{}
	l.recovering = false
	l.expiry.Clear()
	l.checkpoints.Clear()
	if l.primary {
		now := l.now()
		for _, ls := range leases {
			l.startClockLocked(ls, 0, now)
			l.scheduleCheckpointLocked(ls, now)
		}
	}
	return nil
}

// Restore wraps the store's snapshot restore: restoreStore replaces the
// store (which re-attaches leased keys as it rebuilds its index), then the
// lease table is recovered from the new image. If restoreStore fails the
// store keeps its content, and so does the lease table.
func (l *Lessor) Restore(restoreStore func() error, r AuxReader) error {
	l.mu.Lock()
	saved, savedPending := l.leases, l.pending
	l.leases = map[int64]*leaseState{}
	l.pending = map[int64]map[string]struct{}{}
	l.recovering = true
	l.expiry.Clear()
	l.mu.Unlock()

	if err := restoreStore(); err != nil {
		l.mu.Lock()
		l.leases, l.pending, l.recovering = saved, savedPending, false
		if l.primary {
			now := l.now()
			for _, ls := range saved {
				if ls.expiry != forever {
					l.expiry.Upsert(ls)
				}
				l.scheduleCheckpointLocked(ls, now)
			}
		}
		l.mu.Unlock()
		return err
	}
	return l.Recover(r)
}

// Leases lists every lease ID: on the primary in expiry order (soonest
// first), elsewhere in ID order.
func (l *Lessor) Leases() []int64 {
	type byExpiry struct {
		expiry time.Duration
		id     int64
	}
	l.mu.RLock()
	all := make([]byExpiry, 0, len(l.leases))
	for _, ls := range l.leases {
		all = append(all, byExpiry{ls.expiry, ls.id})
	}
	l.mu.RUnlock()
	slices.SortFunc(all, func(a, b byExpiry) int {
		if c := cmp.Compare(a.expiry, b.expiry); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	ids := make([]int64, len(all))
	for i, e := range all {
		ids[i] = e.id
	}
	return ids
}
