package corruption

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// PeerHashKVPath is etcd's PeerHashKVPath: where a member answers its
// peers' HashKV requests (Checker.ServeHashKV).
const PeerHashKVPath = "/members/hashkv"

// maxHashKVBody bounds a peer's /members/hashkv request or answer.
const maxHashKVBody = 64 << 10

// Member is what the checks need of their member.
type Member interface {
	// ID and ClusterID are the member's and its cluster's.
	ID() uint64
	ClusterID() uint64
	// HashKV hashes the key history up to rev (0: the current one).
	HashKV(rev int64) (kvstore.HashKVResult, error)
	// CompactRev is the store's compacted revision.
	CompactRev() int64
	// PeerURLs are the other members' peer URLs, by member ID.
	PeerURLs() map[uint64][]string
	// LinearizableRead waits until the member has applied everything
	// committed before it was called (a ReadIndex round).
	LinearizableRead(ctx context.Context) error
	// RaiseCorrupt raises a CORRUPT alarm for member id through raft, in
	// the background (0: the members at fault are not known).
	RaiseCorrupt(id uint64)
}

// ServeHashKV answers a peer's HashKV request (etcd's hashKVHandler).
func (c *Checker) ServeHashKV(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if gcid := r.Header.Get(membership.ClusterIDHeader); gcid != "" && gcid != strconv.FormatUint(c.m.ClusterID(), 16) {
		http.Error(w, "cluster ID mismatch", http.StatusPreconditionFailed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxHashKVBody))
	if err != nil {
		http.Error(w, "error reading body", http.StatusBadRequest)
		return
	}
	req := &pb.HashKVRequest{}
	if err := json.Unmarshal(body, req); err != nil {
		http.Error(w, "error unmarshalling request", http.StatusBadRequest)
		return
	}
	h, err := c.m.HashKV(req.Revision)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &pb.HashKVResponse{
		Header:          &pb.ResponseHeader{Revision: h.Revision},
		Hash:            h.Hash,
		CompactRevision: h.CompactRevision,
		HashRevision:    h.HashRevision,
	}
	data, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set(membership.ClusterIDHeader, strconv.FormatUint(c.m.ClusterID(), 16))
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// peerHash is one peer's answer to a HashKV request.
type peerHash struct {
	id   uint64
	urls []string
	resp *pb.HashKVResponse // nil when no URL answered
	err  error
}

// peerHashes asks every other member for its hash at rev, trying each of
// its peer URLs in turn (etcd's getPeerHashKVs).
func (c *Checker) peerHashes(rev int64) []peerHash {
	var out []peerHash
	peers := c.m.PeerURLs()
	ids := make([]uint64, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	slices.Sort(ids) // ask, and log, in one order
	for _, id := range ids {
		p := peerHash{id: id, urls: peers[id]}
		for _, u := range p.urls {
			ctx, cancel := context.WithTimeout(context.Background(), c.reqTimeout)
			p.resp, p.err = c.fetchPeerHash(ctx, u, rev)
			cancel()
			if p.err == nil {
				break
			}
			c.log.Warn("failed hash kv request", "requested-revision", rev, "remote-peer-endpoint", u, "error", p.err)
		}
		out = append(out, p)
	}
	return out
}

func (c *Checker) fetchPeerHash(ctx context.Context, peerURL string, rev int64) (*pb.HashKVResponse, error) {
	body, err := json.Marshal(&pb.HashKVRequest{Revision: rev})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+PeerHashKVPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(membership.ClusterIDHeader, strconv.FormatUint(c.m.ClusterID(), 16))
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxHashKVBody))
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusBadRequest && strings.Contains(string(data), kvstore.ErrCompacted.Error()):
		return nil, kvstore.ErrCompacted
	case resp.StatusCode == http.StatusBadRequest && strings.Contains(string(data), kvstore.ErrFutureRev.Error()):
		return nil, kvstore.ErrFutureRev
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("unknown error: %s", bytes.TrimSpace(data))
	}
	out := &pb.HashKVResponse{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	if out.Header == nil {
		out.Header = &pb.ResponseHeader{}
	}
	return out, nil
}

// InitialCheck is etcd's InitialCheck: an error means this member's data
// differs from a peer's at the same revision and compacted revision.
func (c *Checker) InitialCheck() error {
	c.log.Info("starting initial corruption check", "local-member-id", fmt.Sprintf("%x", c.m.ID()), "timeout", c.reqTimeout)
	h, err := c.m.HashKV(0)
	if err != nil {
		return fmt.Errorf("%x failed to fetch hash (%w)", c.m.ID(), err)
	}
	mismatch := 0
	for _, p := range c.peerHashes(h.HashRevision) {
		if p.resp == nil {
			c.log.Warn("cannot fetch hash from remote peer", "remote-peer-id", fmt.Sprintf("%x", p.id), "error", p.err)
			continue
		}
		if p.resp.Hash == h.Hash {
			continue
		}
		log := c.log.With("local-member-revision", h.HashRevision, "local-member-compact-revision", h.CompactRevision,
			"local-member-hash", h.Hash, "remote-peer-id", fmt.Sprintf("%x", p.id),
			"remote-peer-compact-revision", p.resp.CompactRevision, "remote-peer-hash", p.resp.Hash)
		if p.resp.CompactRevision == h.CompactRevision {
			log.Warn("found different hash values from remote peer")
			mismatch++
		} else {
			log.Warn("found different compact revision values from remote peer")
		}
	}
	if mismatch > 0 {
		return fmt.Errorf("%x found data inconsistency with peers", c.m.ID())
	}
	c.log.Info("initial corruption checking passed; no corruption", "local-member-id", fmt.Sprintf("%x", c.m.ID()))
	return nil
}

// PeriodicCheck is etcd's PeriodicCheck, run by the leader.
func (c *Checker) PeriodicCheck() error {
	h, err := c.m.HashKV(0)
	if err != nil {
		return err
	}
	peers := c.peerHashes(h.HashRevision)
	if err := c.m.LinearizableRead(context.Background()); err != nil {
		return err
	}
	h2, err := c.m.HashKV(0)
	if err != nil {
		return err
	}
	alarmed := false
	mismatch := func(id uint64, msg string, args ...any) {
		c.log.Warn(msg, args...)
		if !alarmed {
			alarmed = true
			c.m.RaiseCorrupt(id)
		}
	}
	if h2.Hash != h.Hash && h2.HashRevision == h.HashRevision && h.CompactRevision == h2.CompactRevision {
		mismatch(c.m.ID(), "found hash mismatch", "revision-1", h.HashRevision, "hash-1", h.Hash, "revision-2", h2.HashRevision, "hash-2", h2.Hash)
	}
	checked := 0
	for _, p := range peers {
		if p.resp == nil {
			continue
		}
		checked++
		peer := fmt.Sprintf("%x", p.id)
		if p.resp.Header.Revision > h2.Revision {
			mismatch(p.id, "revision from follower must be less than or equal to leader's",
				"leader-revision", h2.Revision, "follower-revision", p.resp.Header.Revision, "follower-peer-id", peer)
		}
		if p.resp.CompactRevision > h2.CompactRevision {
			mismatch(p.id, "compact revision from follower must be less than or equal to leader's",
				"leader-compact-revision", h2.CompactRevision, "follower-compact-revision", p.resp.CompactRevision, "follower-peer-id", peer)
		}
		if p.resp.CompactRevision == h.CompactRevision && p.resp.Hash != h.Hash {
			mismatch(p.id, "same compact revision then hashes must match",
				"leader-compact-revision", h2.CompactRevision, "leader-hash", h.Hash,
				"follower-compact-revision", p.resp.CompactRevision, "follower-hash", p.resp.Hash, "follower-peer-id", peer)
		}
	}
	c.log.Info("finished peer corruption check", "number-of-peers-checked", checked)
	return nil
}

// CompactHashCheck is etcd's CompactHashCheck over the latest compacted
// revision (etcd also looks at up to 10 older ones whose hashes it kept;
// kvstore keeps none, and every member hashes a compacted revision alike).
func (c *Checker) CompactHashCheck() {
	compactRev := c.m.CompactRev()
	c.mu.Lock()
	checked := c.latestCompactCheck
	c.mu.Unlock()
	if compactRev <= 0 || compactRev <= checked {
		return
	}
	c.log.Info("starting compact hash check", "local-member-id", fmt.Sprintf("%x", c.m.ID()), "timeout", c.reqTimeout)
	h, err := c.m.HashKV(compactRev)
	if err != nil {
		c.log.Warn("compact hash check: cannot hash the compacted revision", "revision", compactRev, "error", err)
		return
	}
	// etcd's leader says so after each round, whatever it found.
	defer c.log.Info("finished compaction hash check", "number-of-hashes-checked", 1)
	peers := c.peerHashes(compactRev)
	groups := map[uint32][]uint64{h.Hash: {c.m.ID()}}
	peersChecked := 0
	for _, p := range peers {
		if p.resp == nil || p.resp.CompactRevision != h.CompactRevision {
			c.log.Warn("Skipped peer's hash", "peer-id", fmt.Sprintf("%x", p.id), "error", p.err)
			continue
		}
		peersChecked++
		groups[p.resp.Hash] = append(groups[p.resp.Hash], p.id)
	}
	if len(groups) == 1 {
		if peersChecked == len(peers) {
			c.log.Info("successfully checked hash on whole cluster", "number-of-peers-checked", peersChecked, "revision", compactRev)
			c.mu.Lock()
			c.latestCompactCheck = max(c.latestCompactCheck, compactRev)
			c.mu.Unlock()
		}
		return
	}
	quorum := (len(peers)+1)/2 + 1
	majority, found := uint32(0), false
	for hash, ids := range groups {
		if len(ids) >= quorum {
			majority, found = hash, true
		}
	}
	if !found {
		c.log.Error("Detected compaction hash mismatch but cannot identify the corrupted members, so intentionally set the memberID as 0",
			"leader-revision", compactRev, "leader-hash", h.Hash)
		c.m.RaiseCorrupt(0)
		return
	}
	for hash, ids := range groups {
		if hash == majority {
			continue
		}
		for _, id := range ids {
			c.log.Error("Detected compaction hash mismatch", "leader-compact-revision", compactRev, "peer-hash", hash, "peer-id", fmt.Sprintf("%x", id))
			c.m.RaiseCorrupt(id)
		}
	}
}

// Checker runs the checks of one member. Lock order: mu is a leaf.
type Checker struct {
	m          Member
	log        *slog.Logger
	reqTimeout time.Duration // bounds each peer's answer
	client     *http.Client  // asks peers at PeerHashKVPath

	mu                 sync.Mutex
	latestCompactCheck int64 // newest compacted revision checked on every member
}

// New is the checker of member m. client reaches the peers (their TLS);
// it follows no redirect. Each peer's answer is bounded by reqTimeout.
func New(m Member, client *http.Client, reqTimeout time.Duration, log *slog.Logger) *Checker {
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Checker{m: m, log: log, reqTimeout: reqTimeout, client: client}
}
