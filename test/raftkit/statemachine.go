package raftkit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/format/raftsnap"
)

// State is what a StateMachine holds, and what its image carries.
type State struct {
	Applied  uint64
	Payloads []string
	// ConfChanges counts the conf-change entries applied.
	ConfChanges int
	// Vetoed are the indexes of the conf changes this state machine
	// vetoed, recorded with the state as ValidateConfChange requires.
	Vetoed []uint64
}

// ErrVetoed is the reason a StateMachine gives when asked again about a
// conf change it vetoed before.
var ErrVetoed = errors.New("raftkit: vetoed")

// StateMachine implements raftnode.StateMachine (and its
// ConfChangeValidator) over a State; see the package doc.
type StateMachine struct {
	mu        sync.Mutex
	state     State
	violation error
	inApply   bool
	restores  int
	changed   chan struct{} // closed and replaced on every change
	// beforeApply, if set, runs (without mu) before each entry is applied.
	beforeApply func(e raftpb.Entry)
	// veto, if set, decides conf changes; nil accepts all. vetoing is the
	// index it last vetoed, until that entry is applied.
	veto    func(cc raftpb.ConfChangeI) error
	vetoing uint64
	// heldValidations counts ValidateConfChange calls for entries the state
	// machine already held (raft's replay after a restart).
	heldValidations int
}

// New returns an empty state machine.
func New() *StateMachine { return &StateMachine{changed: make(chan struct{})} }

// SetBeforeApply makes fn run before each entry is applied, outside the
// state machine's lock: tests use it to hold the apply loop.
func (s *StateMachine) SetBeforeApply(fn func(e raftpb.Entry)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beforeApply = fn
}

// SetVeto makes fn decide the next conf changes; nil accepts all.
func (s *StateMachine) SetVeto(fn func(cc raftpb.ConfChangeI) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.veto = fn
}

// SetApplied pretends the state machine holds entries up to index, as an
// engine that recovered them would.
func (s *StateMachine) SetApplied(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Applied = index
}

// AppliedIndex is the index of the last applied entry.
func (s *StateMachine) AppliedIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Applied
}

// ValidateConfChange answers from the veto record for entries it holds,
// and from the veto policy for the next entry.
func (s *StateMachine) ValidateConfChange(index uint64, cc raftpb.ConfChangeI) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index <= s.state.Applied {
		s.heldValidations++
		if slices.Contains(s.state.Vetoed, index) {
			return ErrVetoed
		}
		return nil
	}
	if index != s.state.Applied+1 {
		s.violate(fmt.Errorf("conf change %d validated with only %d entries applied", index, s.state.Applied))
	}
	if s.veto == nil {
		return nil
	}
	err := s.veto(cc)
	if err != nil {
		s.vetoing = index
	}
	return err
}

// Apply records ents in order, checking the contract.
func (s *StateMachine) Apply(ents []raftpb.Entry) error {
	s.mu.Lock()
	if s.inApply {
		s.violate(fmt.Errorf("concurrent Apply calls"))
	}
	s.inApply = true
	hook := s.beforeApply
	s.mu.Unlock()
	for _, e := range ents {
		if hook != nil {
			hook(e)
		}
		s.mu.Lock()
		s.applyLocked(e, len(ents))
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.inApply = false
	s.mu.Unlock()
	return nil
}

func (s *StateMachine) applyLocked(e raftpb.Entry, batch int) {
	confChange := e.Type == raftpb.EntryConfChange || e.Type == raftpb.EntryConfChangeV2
	if e.Index != s.state.Applied+1 {
		s.violate(fmt.Errorf("applied entry %d after %d", e.Index, s.state.Applied))
	}
	if confChange && batch != 1 {
		s.violate(fmt.Errorf("conf change %d not alone in its batch", e.Index))
	}
	s.state.Applied = e.Index
	if e.Type == raftpb.EntryNormal && len(e.Data) > 0 {
		s.state.Payloads = append(s.state.Payloads, string(e.Data))
	}
	if confChange {
		s.state.ConfChanges++
		if s.vetoing == e.Index {
			s.state.Vetoed = append(s.state.Vetoed, e.Index)
		}
	}
	s.notifyLocked()
}

func (s *StateMachine) violate(err error) {
	if s.violation == nil {
		s.violation = err
	}
}

func (s *StateMachine) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// ImageBytes is an image held in memory.
type ImageBytes []byte

// WriteTo writes the image to w.
func (b ImageBytes) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}

// Release does nothing: the bytes are the garbage collector's.
func (ImageBytes) Release() {}

// Snapshot returns an image of the current state.
func (s *StateMachine) Snapshot() (raftsnap.Source, error) {
	return ImageBytes(s.Image()), nil
}

// Image returns an encoded copy of the current state: what a state
// machine that persisted only this far would hold.
func (s *StateMachine) Image() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return encodeState(&s.state)
}

// Restore replaces the state with the image r, read to its end so that
// the snapshot reader verifies its checksum.
func (s *StateMachine) Restore(r io.Reader, meta raftpb.SnapshotMetadata) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	st, err := decodeState(data)
	if err != nil {
		return fmt.Errorf("decode state: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Applied != meta.Index {
		s.violate(fmt.Errorf("image holds index %d, metadata says %d", st.Applied, meta.Index))
	}
	s.state = st
	s.restores++
	s.notifyLocked()
	return nil
}

// Payloads returns a copy of the applied payloads in order.
func (s *StateMachine) Payloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.state.Payloads)
}

// State returns a copy of the state.
func (s *StateMachine) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state
	st.Payloads = slices.Clone(st.Payloads)
	st.Vetoed = slices.Clone(st.Vetoed)
	return st
}

// Restores counts the images restored.
func (s *StateMachine) Restores() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restores
}

// HeldValidations counts ValidateConfChange calls for entries already held.
func (s *StateMachine) HeldValidations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldValidations
}

// InApply reports whether an Apply call is running.
func (s *StateMachine) InApply() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inApply
}

// Check fails t if the contract was violated.
func (s *StateMachine) Check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.violation != nil {
		t.Fatalf("state machine contract violated: %v", s.violation)
	}
}

// WaitUntil blocks until cond holds on the state (re-checked on every
// change; cond must not keep st) or Timeout passes.
func (s *StateMachine) WaitUntil(t testing.TB, what string, cond func(st *State) bool) {
	t.Helper()
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(&s.state), s.changed
		applied, have := s.state.Applied, len(s.state.Payloads)
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for the state machine: %s (applied %d, %d payloads)", what, applied, have)
		}
	}
}

// WaitPayloads waits until at least n payloads were applied.
func (s *StateMachine) WaitPayloads(t testing.TB, n int) {
	t.Helper()
	s.WaitUntil(t, fmt.Sprintf("%d payloads", n), func(st *State) bool { return len(st.Payloads) >= n })
}

// encodeState lays st out as uvarints: applied, conf changes, the vetoed
// indexes (count first), then the payloads (count first, each
// length-prefixed).
func encodeState(st *State) []byte {
	b := binary.AppendUvarint(nil, st.Applied)
	b = binary.AppendUvarint(b, uint64(st.ConfChanges))
	b = binary.AppendUvarint(b, uint64(len(st.Vetoed)))
	for _, v := range st.Vetoed {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(st.Payloads)))
	for _, p := range st.Payloads {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

func decodeState(b []byte) (State, error) {
	var st State
	next := func() (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, io.ErrUnexpectedEOF
		}
		b = b[n:]
		return v, nil
	}
	var err error
	if st.Applied, err = next(); err != nil {
		return st, err
	}
	cc, err := next()
	if err != nil {
		return st, err
	}
	st.ConfChanges = int(cc)
	nv, err := next()
	if err != nil {
		return st, err
	}
	for ; nv > 0; nv-- {
		v, err := next()
		if err != nil {
			return st, err
		}
		st.Vetoed = append(st.Vetoed, v)
	}
	np, err := next()
	if err != nil {
		return st, err
	}
	for ; np > 0; np-- {
		l, err := next()
		if err != nil {
			return st, err
		}
		if l > uint64(len(b)) {
			return st, io.ErrUnexpectedEOF
		}
		st.Payloads = append(st.Payloads, string(b[:l]))
		b = b[l:]
	}
	if len(b) != 0 {
		return st, fmt.Errorf("%d bytes after the state", len(b))
	}
	return st, nil
}
