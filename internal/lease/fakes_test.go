package lease

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// testDeadline bounds every wait in these tests.
const testDeadline = 10 * time.Second

// fakeClock is a Clock that moves only when the test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever a timer is created
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1_700_000_000, 0), changed: make(chan struct{})}
}

type fakeTimer struct {
	c        *fakeClock
	deadline time.Time
	ch       chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimerAt(at time.Time) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, deadline: at, ch: make(chan time.Time, 1)}
	if !at.After(c.now) {
		t.ch <- c.now
	} else {
		c.timers = append(c.timers, t)
	}
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = slices.Delete(t.c.timers, i, i+1)
			return true
		}
	}
	return false
}

// Advance moves the clock and fires the timers that became due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.deadline.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// waitTimer blocks until a pending timer has exactly deadline: the expiry
// loop has finished a tick and sleeps until then.
func (c *fakeClock) waitTimer(t testing.TB, deadline time.Time) {
	t.Helper()
	timeout := time.After(testDeadline)
	for {
		c.mu.Lock()
		changed := c.changed
		for _, x := range c.timers {
			if x.deadline.Equal(deadline) {
				c.mu.Unlock()
				return
			}
		}
		var have []time.Time
		for _, x := range c.timers {
			have = append(have, x.deadline)
		}
		c.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no timer for %v (have %v)", deadline, have)
		}
	}
}

// advanceToNextTimer waits until a timer is pending and moves the clock
// to the earliest deadline, firing it, unless done reports true by then.
// done is checked under the clock's lock, so anything that happened before
// the pending timers were created is visible to it.
func (c *fakeClock) advanceToNextTimer(t testing.TB, done func() bool) {
	t.Helper()
	timeout := time.After(testDeadline)
	for {
		c.mu.Lock()
		changed := c.changed
		if done() {
			c.mu.Unlock()
			return
		}
		if len(c.timers) > 0 {
			next := c.timers[0].deadline
			for _, x := range c.timers[1:] {
				if x.deadline.Before(next) {
					next = x.deadline
				}
			}
			d := next.Sub(c.now)
			c.mu.Unlock()
			c.Advance(d)
			return
		}
		c.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			t.Fatal("no timer pending")
		}
	}
}

// fakeStore is the store as the lessor sees it: an aux bucket, and a key
// space where keys carry lease IDs (enough to check revoke's deletes and
// its Detach calls back into the lessor).
type fakeStore struct {
	table   *Lessor // receives Detach for deleted leased keys, as kvstore does
	aux     map[string][]byte
	keys    map[string]int64 // key -> lease (0 = none)
	rev     int64
	deletes [][]string // every DeleteKeys call, in order
}

func newFakeStore() *fakeStore {
	return &fakeStore{aux: map[string][]byte{}, keys: map[string]int64{}}
}

func (s *fakeStore) PutAux(bucket byte, key, value []byte) {
	s.aux[string(append([]byte{bucket}, key...))] = slices.Clone(value)
}

func (s *fakeStore) DeleteAux(bucket byte, key []byte) {
	delete(s.aux, string(append([]byte{bucket}, key...)))
}

func (s *fakeStore) AscendAux(bucket byte, fn func(key, value []byte) bool) error {
	var names []string
	for k := range s.aux {
		if k[0] == bucket {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if !fn([]byte(k[1:]), s.aux[k]) {
			return nil
		}
	}
	return nil
}

func (s *fakeStore) DeleteKeys(keys [][]byte) error {
	if !slices.IsSortedFunc(keys, bytes.Compare) {
		panic("DeleteKeys: keys not sorted")
	}
	var deleted []string
	for _, k := range keys {
		id, ok := s.keys[string(k)]
		if !ok {
			continue
		}
		delete(s.keys, string(k))
		if id != 0 && s.table != nil {
			s.table.Detach(id, k)
		}
		deleted = append(deleted, string(k))
	}
	if len(deleted) > 0 {
		s.rev++
	}
	s.deletes = append(s.deletes, deleted)
	return nil
}

// put is kvstore's Put as far as leases go: check, detach old, attach new.
func (s *fakeStore) put(t *testing.T, key string, id int64) {
	t.Helper()
	if id != 0 && !s.table.LeaseExists(id) {
		t.Fatalf("put %q: lease %x does not exist", key, id)
	}
	if old := s.keys[key]; old != 0 {
		s.table.Detach(old, []byte(key))
	}
	s.keys[key] = id
	if id != 0 {
		s.table.Attach(id, []byte(key))
	}
	s.rev++
}

// fakeProposer records proposals; it applies nothing unless told to.
type fakeProposer struct {
	mu          sync.Mutex
	revokes     []int64
	checkpoints [][]*pb.LeaseCheckpoint
	notLeader   bool
	onRevoke    func(id int64) error // optional: e.g. apply it
	onCP        func(cps []*pb.LeaseCheckpoint) error
	changed     chan struct{} // closed and replaced on every proposal
}

func newFakeProposer() *fakeProposer { return &fakeProposer{changed: make(chan struct{})} }

func (p *fakeProposer) ConfirmLeadership(context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.notLeader
}

// ProposeRevoke runs onRevoke (which may apply the entry) before it
// records the proposal, as a proposal returns only once applied: a test
// that waits for the record may then read what the entry changed.
func (p *fakeProposer) ProposeRevoke(_ context.Context, id int64) error {
	p.mu.Lock()
	f := p.onRevoke
	p.mu.Unlock()
	var err error
	if f != nil {
		err = f(id)
	}
	p.mu.Lock()
	p.revokes = append(p.revokes, id)
	p.signalLocked()
	p.mu.Unlock()
	return err
}

// ProposeCheckpoint runs onCP before it records the proposal, for the
// same reason as ProposeRevoke (TestElectionDoesNotRenewForever read the
// follower's TTL after the record and before onCP applied the entry).
func (p *fakeProposer) ProposeCheckpoint(_ context.Context, cps []*pb.LeaseCheckpoint) error {
	p.mu.Lock()
	f := p.onCP
	p.mu.Unlock()
	var err error
	if f != nil {
		err = f(cps)
	}
	p.mu.Lock()
	p.checkpoints = append(p.checkpoints, cps)
	p.signalLocked()
	p.mu.Unlock()
	return err
}

// signalLocked wakes waitFor; p.mu must be held.
func (p *fakeProposer) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitFor blocks until cond (evaluated under p.mu) holds.
func (p *fakeProposer) waitFor(t testing.TB, what string, cond func(p *fakeProposer) bool) {
	t.Helper()
	timeout := time.After(testDeadline)
	for {
		p.mu.Lock()
		ok := cond(p)
		changed := p.changed
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (p *fakeProposer) revoked() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.revokes)
}

// newTestLessor returns a recovered lessor on a fake clock and store.
func newTestLessor(t testing.TB, cfg Config) (*Lessor, *fakeClock, *fakeStore) {
	t.Helper()
	fc := newFakeClock()
	if cfg.Clock == nil {
		cfg.Clock = fc
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := newFakeStore()
	st.table = l
	if err := l.Recover(st); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l, fc, st
}

func mustGrant(t testing.TB, l *Lessor, w AuxWriter, id, ttl int64) {
	t.Helper()
	if _, err := l.ApplyGrant(w, id, ttl); err != nil {
		t.Fatalf("grant %x: %v", id, err)
	}
}
