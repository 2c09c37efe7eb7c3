package server

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/corruption"
	"github.com/metastore-io/metastore/internal/cluster/transport"
)

// The corruption checks are package corruption's; the member runs them:
// the initial one before it serves clients, the periodic ones while it
// leads, and raises the CORRUPT alarms they find through raft.

// corruptionMember is the member as the checks see it.
type corruptionMember struct{ *Server }

func (m corruptionMember) CompactRev() int64 { return m.kv.CompactRev() }

func (m corruptionMember) PeerURLs() map[uint64][]string {
	out := map[uint64][]string{}
	for _, pm := range m.cluster.Members() {
		if pm.ID == m.id || pm.RaftAttributes == nil || len(pm.RaftAttributes.PeerUrls) == 0 {
			continue
		}
		out[pm.ID] = pm.RaftAttributes.PeerUrls
	}
	return out
}

// RaiseCorrupt proposes a CORRUPT alarm for member id, as one of the
// member's goroutines (none once it is stopping).
func (m corruptionMember) RaiseCorrupt(id uint64) { _ = m.spawn(func() { m.raiseCorrupt(id) }) }

func newCorruptionChecker(s *Server) *corruption.Checker {
	return corruption.New(corruptionMember{s}, transport.PeerHTTPClient(s.cfg.PeerTLS, 0), s.reqTimeout, s.log)
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
	return s.corruption.InitialCheck()
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
		s.corruption.CompactHashCheck()
	}
}

// startCorruptionMonitors starts the periodic checks the config enables.
func (s *Server) startCorruptionMonitors() {
	if s.cfg.CorruptCheckTime > 0 {
		s.serving.Add(1)
		go s.monitorCorruption(s.cfg.CorruptCheckTime, s.corruption.PeriodicCheck)
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
