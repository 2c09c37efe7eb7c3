package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// Corruption checks, etcd's (etcdserver/corrupt.go), over HashKV: members
// that applied the same log must have the same hash of the key history at
// every revision, whatever their storage engine.
//
//   - initial check (--experimental-initial-corrupt-check, gate
//     InitialCorruptCheck): a restarting member, before it serves clients,
//     compares its hash at its current revision with every peer's at that
//     revision; a different hash at the same compacted revision stops it.
//   - periodic check (--corrupt-check-time): the leader hashes, asks every
//     peer for its hash at that revision, hashes again after a linearizable
//     read; it raises a CORRUPT alarm for itself if its own hash changed
//     under it, or for a follower that is ahead of it, compacted further,
//     or has another hash at the same compacted revision.
//   - compact hash check (--experimental-compact-hash-check-enabled, gate
//     CompactHashCheck; every --compact-hash-check-time): the leader
//     compares the hashes at the latest compacted revision; members in the
//     minority (all: member 0, when no majority agrees) get a CORRUPT alarm.
//
// Peers answer on their peer URLs at /members/hashkv, etcd's endpoint and
// wire format (a JSON HashKVRequest in a GET body, a JSON HashKVResponse).
// A CORRUPT alarm makes every member refuse writes (alarmGate) until it
// is disarmed.

// peerHashKVPath is etcd's PeerHashKVPath.
const peerHashKVPath = "/members/hashkv"

// maxHashKVBody bounds a peer's /members/hashkv request or answer.
const maxHashKVBody = 64 << 10

// serveHashKV answers a peer's HashKV request (etcd's hashKVHandler).
func (s *Server) serveHashKV(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if gcid := r.Header.Get(clusterIDHeader); gcid != "" && gcid != strconv.FormatUint(s.cluster.ID(), 16) {
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
	h, err := s.kv.HashKV(req.Revision)
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
	w.Header().Set(clusterIDHeader, strconv.FormatUint(s.cluster.ID(), 16))
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
func (s *Server) peerHashes(rev int64) []peerHash {
	var out []peerHash
	for _, m := range s.cluster.Members() {
		if m.ID == s.id || m.RaftAttributes == nil || len(m.RaftAttributes.PeerUrls) == 0 {
			continue
		}
		p := peerHash{id: m.ID, urls: m.RaftAttributes.PeerUrls}
		for _, u := range p.urls {
			ctx, cancel := context.WithTimeout(context.Background(), s.reqTimeout)
			p.resp, p.err = s.fetchPeerHash(ctx, u, rev)
			cancel()
			if p.err == nil {
				break
			}
			s.log.Warn("failed hash kv request", "requested-revision", rev, "remote-peer-endpoint", u, "error", p.err)
		}
		out = append(out, p)
	}
	return out
}

func (s *Server) fetchPeerHash(ctx context.Context, peerURL string, rev int64) (*pb.HashKVResponse, error) {
	body, err := json.Marshal(&pb.HashKVRequest{Revision: rev})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+peerHashKVPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(clusterIDHeader, strconv.FormatUint(s.cluster.ID(), 16))
	resp, err := s.corruption.client.Do(req)
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

// corruptionChecker holds the state of the compact hash check. It holds
// the Server, built once raft runs (startRaft): the checks read the
// store, ask the peers, confirm reads and raise alarms through raft,
// which is most of the member. Lock order: mu is a leaf.
type corruptionChecker struct {
	s                  *Server
	client             *http.Client // asks peers at /members/hashkv
	mu                 sync.Mutex
	latestCompactCheck int64 // newest compacted revision checked on every member
}

func newCorruptionChecker(s *Server) *corruptionChecker {
	client := peerHTTPClient(s.cfg.PeerTLS, 0)
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &corruptionChecker{s: s, client: client}
}

// initialCheck is etcd's InitialCheck: an error means this member's data
// differs from a peer's at the same revision and compacted revision.
func (c *corruptionChecker) initialCheck() error {
	s := c.s
	s.log.Info("starting initial corruption check", "local-member-id", fmt.Sprintf("%x", s.id), "timeout", s.reqTimeout)
	h, err := s.kv.HashKV(0)
	if err != nil {
		return fmt.Errorf("%x failed to fetch hash (%w)", s.id, err)
	}
	mismatch := 0
	for _, p := range s.peerHashes(h.HashRevision) {
		if p.resp == nil {
			s.log.Warn("cannot fetch hash from remote peer", "remote-peer-id", fmt.Sprintf("%x", p.id), "error", p.err)
			continue
		}
		if p.resp.Hash == h.Hash {
			continue
		}
		log := s.log.With("local-member-revision", h.HashRevision, "local-member-compact-revision", h.CompactRevision,
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
		return fmt.Errorf("%x found data inconsistency with peers", s.id)
	}
	s.log.Info("initial corruption checking passed; no corruption", "local-member-id", fmt.Sprintf("%x", s.id))
	return nil
}

// initialCorruptCheck waits until the entries the log held committed at
// start are applied (the memory engine replays them), then runs the
// initial check.
func (s *Server) initialCorruptCheck() error {
	target := s.node.Status().CommitIndex
	deadline := time.Now().Add(s.reqTimeout)
	for s.node.Status().AppliedIndex < target {
		if time.Now().After(deadline) {
			return fmt.Errorf("%x did not apply its log up to %d within %v", s.id, target, s.reqTimeout)
		}
		select {
		case <-s.node.Done():
			return fmt.Errorf("raft stopped: %w", s.node.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return s.corruption.initialCheck()
}

// periodicCheck is etcd's PeriodicCheck, run by the leader.
func (c *corruptionChecker) periodicCheck() error {
	s := c.s
	h, err := s.kv.HashKV(0)
	if err != nil {
		return err
	}
	peers := s.peerHashes(h.HashRevision)
	if err := s.LinearizableRead(context.Background()); err != nil {
		return err
	}
	h2, err := s.kv.HashKV(0)
	if err != nil {
		return err
	}
	alarmed := false
	mismatch := func(id uint64, msg string, args ...any) {
		s.log.Warn(msg, args...)
		if !alarmed {
			alarmed = true
			_ = s.spawn(func() { s.raiseCorrupt(id) })
		}
	}
	if h2.Hash != h.Hash && h2.HashRevision == h.HashRevision && h.CompactRevision == h2.CompactRevision {
		mismatch(s.id, "found hash mismatch", "revision-1", h.HashRevision, "hash-1", h.Hash, "revision-2", h2.HashRevision, "hash-2", h2.Hash)
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
	s.log.Info("finished peer corruption check", "number-of-peers-checked", checked)
	return nil
}

// compactHashCheck is etcd's CompactHashCheck over the latest compacted
// revision (etcd also looks at up to 10 older ones whose hashes it kept;
// kvstore keeps none, and every member hashes a compacted revision alike).
func (c *corruptionChecker) compactHashCheck() {
	s := c.s
	compactRev := s.kv.CompactRev()
	c.mu.Lock()
	checked := c.latestCompactCheck
	c.mu.Unlock()
	if compactRev <= 0 || compactRev <= checked {
		return
	}
	s.log.Info("starting compact hash check", "local-member-id", fmt.Sprintf("%x", s.id), "timeout", s.reqTimeout)
	h, err := s.kv.HashKV(compactRev)
	if err != nil {
		s.log.Warn("compact hash check: cannot hash the compacted revision", "revision", compactRev, "error", err)
		return
	}
	peers := s.peerHashes(compactRev)
	groups := map[uint32][]uint64{h.Hash: {s.id}}
	peersChecked := 0
	for _, p := range peers {
		if p.resp == nil || p.resp.CompactRevision != h.CompactRevision {
			s.log.Warn("Skipped peer's hash", "peer-id", fmt.Sprintf("%x", p.id), "error", p.err)
			continue
		}
		peersChecked++
		groups[p.resp.Hash] = append(groups[p.resp.Hash], p.id)
	}
	if len(groups) == 1 {
		if peersChecked == len(peers) {
			s.log.Info("successfully checked hash on whole cluster", "number-of-peers-checked", peersChecked, "revision", compactRev)
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
		s.log.Error("Detected compaction hash mismatch but cannot identify the corrupted members, so intentionally set the memberID as 0",
			"leader-revision", compactRev, "leader-hash", h.Hash)
		_ = s.spawn(func() { s.raiseCorrupt(0) })
		return
	}
	for hash, ids := range groups {
		if hash == majority {
			continue
		}
		for _, id := range ids {
			s.log.Error("Detected compaction hash mismatch", "leader-compact-revision", compactRev, "peer-hash", hash, "peer-id", fmt.Sprintf("%x", id))
			_ = s.spawn(func() { s.raiseCorrupt(id) })
		}
	}
}

// raiseCorrupt proposes a CORRUPT alarm for member id.
func (s *Server) raiseCorrupt(id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), s.reqTimeout)
	defer cancel()
	s.raiseAlarm(ctx, id, pb.AlarmType_CORRUPT)
}

// monitorCorruption runs the periodic check every interval on the leader
// (etcd's monitorKVHash).
func (s *Server) monitorCorruption(interval time.Duration, check func() error) {
	s.log.Info("enabled corruption checking", "interval", interval)
	s.everyIntervalWhileLeading(interval, func() {
		if err := check(); err != nil {
			s.log.Warn("failed to check hash KV", "error", err)
		}
	})
}

// everyIntervalWhileLeading calls f every interval while this member
// leads, until it stops; it is one of the serving goroutines.
func (s *Server) everyIntervalWhileLeading(interval time.Duration, f func()) {
	defer s.serving.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stopping:
			return
		case <-t.C:
		}
		if s.node.Status().Leader == s.id {
			f()
		}
	}
}

// monitorCompactHash runs the compact hash check every interval on the
// leader (etcd's monitorCompactHash).
func (s *Server) monitorCompactHash(interval time.Duration) {
	defer s.serving.Done()
	for {
		select {
		case <-s.stopping:
			return
		case <-time.After(interval):
		}
		if s.node.Status().Leader != s.id {
			continue
		}
		s.corruption.compactHashCheck()
	}
}

// startCorruptionMonitors starts the periodic checks the config enables.
func (s *Server) startCorruptionMonitors() {
	if s.cfg.CorruptCheckTime > 0 {
		s.serving.Add(1)
		go s.monitorCorruption(s.cfg.CorruptCheckTime, s.corruption.periodicCheck)
	}
	if s.cfg.CompactHashCheck {
		interval := s.cfg.CompactHashCheckTime
		if interval <= 0 {
			interval = time.Minute
		}
		s.serving.Add(1)
		go s.monitorCompactHash(interval)
	}
}
