package raftnode

import (
	"fmt"
	"go.etcd.io/raft/v3/raftpb"
	"sync"
	"testing"

	"github.com/metastore-io/metastore/test/raftkit"
)

// idleSM is a fakeSM with idle work: each applied batch adds steps of
// work, each IdleWork call does one. It records whether IdleWork ever
// ran while Apply did.
type idleSM struct {
	*raftkit.StateMachine
	perBatch int

	mu       sync.Mutex
	left     int
	done     int
	overlaps bool
}

func (s *idleSM) Apply(ents []raftpb.Entry) error {
	if err := s.StateMachine.Apply(ents); err != nil {
		return err
	}
	s.mu.Lock()
	s.left += s.perBatch
	s.mu.Unlock()
	return nil
}

func (s *idleSM) IdleWork() (bool, error) {
	inApply := s.StateMachine.InApply()
	s.mu.Lock()
	defer s.mu.Unlock()
	if inApply {
		s.overlaps = true
	}
	if s.left == 0 {
		return false, nil
	}
	s.left--
	s.done++
	return s.left > 0, nil
}

func (s *idleSM) counts() (left, done int, overlaps bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.left, s.done, s.overlaps
}

// TestIdleWorkRunsBetweenBatches: with no entries to apply, the apply
// loop gives the state machine's IdleWorker steps until it reports no
// more, on the apply goroutine (never during an Apply).
func TestIdleWorkRunsBetweenBatches(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	sm := &idleSM{StateMachine: raftkit.New(), perBatch: 25}
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)
	for round := range 3 {
		p := fmt.Sprintf("idle%d", round)
		proposeAll(t, n, []string{p})
		sm.WaitPayloads(t, round+1)
		raftkit.WaitFor(t, "the idle work of the batch", func() bool {
			left, _, _ := sm.counts()
			return left == 0
		})
	}
	_, done, overlaps := sm.counts()
	if overlaps {
		t.Fatal("IdleWork ran during an Apply")
	}
	// The leader's empty entry and the three proposals each brought 25
	// steps (batches may merge, never split work).
	if done < 25*3 || done%25 != 0 {
		t.Fatalf("%d steps of idle work done, want whole batches of 25", done)
	}
}
