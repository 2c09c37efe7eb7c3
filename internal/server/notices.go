package server

import "github.com/metastore-io/metastore/internal/statemachine"

// actOnApplyNotices acts on what apply leaves for the member to do
// through raft (statemachine.Notices). It runs from startServing until the member stops. Each
// notice runs in a goroutine of its own (it proposes and waits for its
// apply). Notices left when the member stops are dropped: their
// proposers are answered ErrStopped by propose, which waits on stopping
// too.
func (s *Server) actOnApplyNotices() {
	defer s.serving.Done()
	for {
		select {
		case <-s.stopping:
			return
		case <-s.notices.Wake():
		}
		for _, n := range s.notices.Take() {
			s.actOn(n)
		}
	}
}

func (s *Server) actOn(n statemachine.Notice) {
	switch n.Kind {
	case statemachine.NoticeNoSpace:
		if s.spawn(func() { s.raiseNoSpaceThenAnswer(n.Held) }) != nil {
			for _, r := range n.Held {
				s.wait.Trigger(r.ID, statemachine.Result{Err: ErrStopped})
			}
		}
	case statemachine.NoticeClusterVersion:
		// ErrStopped means the member is stopping and nothing is left
		// to do.
		_ = s.spawn(func() { s.versions.SetInitial(n.Term) })
	}
}
