package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// storeUsers counts the work that holds the store or the engine beside
// apply (snapshot images being sent, a defragmentation, an alarm being
// raised): the member closes its store only once all of it has ended.
// close, set once by shutdown, refuses new work, so enter never races
// wait.
type storeUsers struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter registers one user; false once the member is stopping.
func (u *storeUsers) enter() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return false
	}
	u.wg.Add(1)
	return true
}

func (u *storeUsers) leave() { u.wg.Done() }

// closeAndWait refuses new users and waits for the ones in progress.
func (u *storeUsers) closeAndWait() {
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
	u.wg.Wait()
}

func (u *storeUsers) isClosed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.closed
}

// spawn runs f in a goroutine the member waits for before it closes its
// store; ErrStopped if the member is stopping.
func (s *Server) spawn(f func()) error { return s.users.spawn(f) }

// spawn runs f in a goroutine counted as a user; ErrStopped once closed.
func (u *storeUsers) spawn(f func()) error {
	if !u.enter() {
		return ErrStopped
	}
	go func() {
		defer u.leave()
		f()
	}()
	return nil
}

// supervise runs from New until the member stops: it stops the member
// when it fails on its own (a fatal error, its raft node stopping after a
// failed disk write or apply) or shortly after it applied its own removal
// (etcd's stopWithDelay: long enough for the entry to reach the others; a
// removed leader keeps leading until then). Stop waits for it.
func (s *Server) supervise() {
	defer s.supervisor.Done()
	select {
	case <-s.stopping:
		return
	case <-s.failed:
	case <-s.node.Done():
		if err := s.node.Err(); err != nil {
			s.setErr(fmt.Errorf("raft node stopped: %w", err))
		}
	case <-s.removed:
		t := time.NewTimer(removedStopDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.stopping:
			return
		}
		// etcd's two lines as its server loop stops on the removal.
		s.log.Warn("server error", "error", ErrRemoved.Error())
		s.log.Warn("data-dir used by this member must be removed")
	}
	s.shutdown()
}

// Stop shuts the member down gracefully and returns once everything it
// started has ended: watch streams end (their clients get etcd's "server
// stopped"), in-flight client RPCs drain, a leader hands leadership to
// another voter, no new proposals are accepted, the apply in progress
// finishes, the WAL is closed cleanly, the peer transport and listeners
// close, and the store and backend are closed. It is safe to call more
// than once, and after the member stopped on its own.
func (s *Server) Stop() {
	s.stopClients()
	s.transferLeadershipOnStop()
	s.shutdown()
	s.supervisor.Wait()
}

// Fail stops the member on its own with err as the reason (Err): what its
// owner does when a part it runs beside the member fails (a client
// listener that cannot be served).
func (s *Server) Fail(msg string, err error) { s.fatal(msg, err) }

// fatal reports an unrecoverable error (the member's state would
// diverge): the member stops (supervise), Done closes and Err says why.
func (s *Server) fatal(msg string, err error) {
	s.log.Error(msg, "error", err)
	s.setErr(fmt.Errorf("%s: %w", msg, err))
	s.failOnce.Do(func() { close(s.failed) })
}

// removedFromCluster stops this member shortly after it applied its own
// removal (supervise).
func (s *Server) removedFromCluster() {
	s.removedOnce.Do(func() {
		s.log.Warn("this member was removed from the cluster; stopping")
		s.setErr(ErrRemoved)
		close(s.removed)
	})
}

// stopClients ends the watch streams and lets the owner of the client
// services drain the RPCs in flight (Config.BeforeStop): watch streams
// never end by themselves, so they go first and the drain waits only for
// unary RPCs.
func (s *Server) stopClients() {
	s.hub.Close()
	s.beforeStop.Do(func() {
		if s.cfg.BeforeStop != nil {
			s.cfg.BeforeStop()
		}
	})
}

// shutdown stops every part in the reverse order of New, each by its
// owner, once: after it, nothing the member started is running.
func (s *Server) shutdown() {
	s.stopOnce.Do(func() {
		defer close(s.done)
		s.stopClients()
		close(s.stopping)
		if s.compactor != nil {
			s.compactor.Stop()
		}
		s.leases.lessor.Stop()
		s.node.Stop()
		for _, ps := range s.peerServers {
			ps.Close()
		}
		s.transport.Stop()
		s.hub.Close()
		s.auth.Close()
		s.serving.Wait()
		// Snapshots being sent notice stopping at their next write and
		// are released by their handlers; a defragmentation finishes.
		s.users.closeAndWait()
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

// Done is closed once the member has stopped, by Stop or on its own (see
// Err).
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is why the member stopped on its own: a fatal error, ErrRemoved,
// or a failure to serve its listeners. It is nil while running and after
// a plain Stop.
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

// servePeers serves the peer API (the transport and /members) on every
// peer listener at once: raft needs them to elect a leader (and a joining
// member to receive the state) before this member is ready.
func (s *Server) servePeers() {
	handler := s.PeerHandler()
	for _, l := range s.cfg.PeerListeners {
		hs := &http.Server{Handler: handler, ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn)}
		s.ConfigurePeerServer(hs)
		s.peerServers = append(s.peerServers, hs)
		s.log.Info("serving peer traffic", "address", l.Addr().String())
		s.serving.Add(1)
		go func() {
			defer s.serving.Done()
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.fatal("serve peers", err)
			}
		}()
	}
}
