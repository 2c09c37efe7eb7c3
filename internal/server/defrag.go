package server

import (
	"context"
	"fmt"
	"time"
)

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
	// The compaction cannot be cut short: a caller that gives up leaves
	// it running, and the member waits for it before closing the engine.
	if !s.users.enter() {
		return ErrStopped
	}
	sizeBefore, inUseBefore := s.kv.Size(), s.kv.SizeInUse()
	// The sizes after are read here, while the member still counts this
	// goroutine as a user of the store: once it leaves, Stop may close
	// the engine under anyone who reads it.
	type outcome struct {
		err                   error
		sizeAfter, inUseAfter int64
	}
	done := make(chan outcome, 1)
	go func() {
		defer s.users.leave()
		s.metrics.defragInflight.Inc()
		// Timed to the end, even when the caller stops waiting.
		err := c.Compact()
		s.metrics.defragInflight.Dec()
		s.metrics.defragSeconds.Observe(time.Since(start).Seconds())
		done <- outcome{err: err, sizeAfter: s.kv.Size(), inUseAfter: s.kv.SizeInUse()}
	}()
	s.log.Info("starting defragment", "current-db-size-bytes", sizeBefore, "current-db-size-in-use-bytes", inUseBefore)
	// The engine reports no fraction done: a long defragmentation logs
	// how long it has run and where the size stands, so an operator sees
	// it moving.
	progress := time.NewTicker(s.defragLogEvery)
	defer progress.Stop()
	for {
		select {
		case out := <-done:
			if out.err != nil {
				s.log.Warn("failed to defragment", "error", out.err)
				return fmt.Errorf("defragment: %w", out.err)
			}
			s.log.Info("finished defragment", "took", time.Since(start),
				"db-size-bytes-before", sizeBefore, "db-size-bytes-after", out.sizeAfter,
				"db-size-in-use-bytes-after", out.inUseAfter)
			return nil
		case <-progress.C:
			// The compaction may have just ended and left: the size is
			// read only as a user of the store.
			if !s.users.enter() {
				continue
			}
			sizeNow := s.kv.Size()
			s.users.leave()
			s.log.Info("defragment in progress", "elapsed", time.Since(start).Round(time.Second),
				"db-size-bytes-before", sizeBefore, "db-size-bytes-now", sizeNow)
		case <-ctx.Done():
			s.log.Info("defragment goes on after its caller stopped waiting", "elapsed", time.Since(start).Round(time.Second))
			return ctx.Err()
		}
	}
}

// defragProgressInterval is how often a running defragmentation logs.
const defragProgressInterval = 5 * time.Second
