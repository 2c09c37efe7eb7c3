package raftnode

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/raftnode/wal"

	"github.com/metastore-io/metastore/test/raftkit"
)

// countingSM applies by counting: the benchmark measures the raft path, not
// a state machine.
type countingSM struct {
	mu      sync.Mutex
	applied uint64
	entries int
	reached chan struct{}
	target  int
	// waiters maps a proposal ID (the payload's first 8 bytes) to the
	// channel its proposer waits on, like a server waiting for its write.
	waiters sync.Map
}

func (s *countingSM) AppliedIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

func (s *countingSM) Apply(ents []raftpb.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ents {
		if e.Type == raftpb.EntryNormal && len(e.Data) >= 8 {
			s.entries++
			if ch, ok := s.waiters.LoadAndDelete(binary.BigEndian.Uint64(e.Data)); ok {
				close(ch.(chan struct{}))
			}
		}
	}
	s.applied = ents[len(ents)-1].Index
	if s.reached != nil && s.entries >= s.target {
		close(s.reached)
		s.reached = nil
	}
	return nil
}

// expect returns a channel closed once n payload entries were applied.
func (s *countingSM) expect(n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if s.entries >= n {
		close(ch)
		return ch
	}
	s.reached, s.target = ch, n
	return ch
}

func (s *countingSM) Snapshot() (Image, error) { return raftkit.ImageBytes(nil), nil }
func (s *countingSM) Restore(io.Reader, raftpb.SnapshotMetadata) error {
	return fmt.Errorf("countingSM cannot restore")
}

// BenchmarkPropose measures committed-and-applied proposals per second on
// one member with a real fsync, for growing numbers of concurrent
// proposers. With wait=apply each proposer waits for its entry to be
// applied before proposing the next, as a server handling writes does;
// entries/fsync then shows group commit at work: more concurrent proposers
// share each WAL fsync.
func BenchmarkPropose(b *testing.B) {
	for _, waitApply := range []bool{false, true} {
		for _, proposers := range []int{1, 16, 128} {
			name := fmt.Sprintf("wait=none/proposers=%d", proposers)
			if waitApply {
				name = fmt.Sprintf("wait=apply/proposers=%d", proposers)
			}
			b.Run(name, func(b *testing.B) { benchmarkPropose(b, proposers, waitApply) })
		}
	}
}

func benchmarkPropose(b *testing.B, proposers int, waitApply bool) {
	var fsyncs atomic.Int64
	cfg := testConfig(b, b.TempDir())
	cfg.syncFile = func(f *os.File) error {
		fsyncs.Add(1)
		return wal.SyncData(f)
	}
	sm := &countingSM{}
	n := mustStart(b, cfg, sm)
	waitLeader(b, n)
	ctx := raftkit.Context(b)
	applied := sm.expect(b.N)
	fsyncs.Store(0)
	b.SetBytes(128)
	b.ResetTimer()
	var wg sync.WaitGroup
	var next atomic.Uint64
	for p := 0; p < proposers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := make([]byte, 128)
			for {
				id := next.Add(1)
				if id > uint64(b.N) {
					return
				}
				binary.BigEndian.PutUint64(payload, id)
				var done chan struct{}
				if waitApply {
					done = make(chan struct{})
					sm.waiters.Store(id, done)
				}
				if err := n.Propose(ctx, payload); err != nil {
					b.Error(err)
					return
				}
				if waitApply {
					select {
					case <-done:
					case <-ctx.Done():
						b.Error("proposal not applied in time")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-applied:
	case <-ctx.Done():
		b.Fatal("proposals not applied in time")
	}
	b.StopTimer()
	if f := fsyncs.Load(); f > 0 {
		b.ReportMetric(float64(b.N)/float64(f), "entries/fsync")
	}
	n.Stop()
}
