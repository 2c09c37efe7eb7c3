package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/metastore-io/metastore/internal/wal"
)

// syncedSizes remembers, per WAL segment, how many bytes the last fsync
// made durable: what a power loss would leave of the file.
type syncedSizes struct {
	mu sync.Mutex
	m  map[string]int64
}

func (s *syncedSizes) sync(f *os.File) error {
	if err := wal.SyncData(f); err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	// A new segment's head is synced under its temporary name.
	name := strings.TrimSuffix(filepath.Base(f.Name()), ".tmp")
	s.mu.Lock()
	s.m[name] = st.Size()
	s.mu.Unlock()
	return nil
}

func (s *syncedSizes) get(name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[name]
}

// TestCrashLosesNoAppliedProposal runs a member under concurrent load and
// takes a crash image of its data dir while it runs: each WAL segment cut
// to what its last fsync made durable, plus a few unsynced bytes that a
// crash may or may not have written (usually a torn record). A member
// started from that image must apply every proposal the crashed member had
// applied, in the same order, each once.
func TestCrashLosesNoAppliedProposal(t *testing.T) {
	dir := t.TempDir()
	synced := &syncedSizes{m: map[string]int64{}}
	cfg := testConfig(t, dir)
	cfg.WALSegmentSizeBytes = 4096
	cfg.syncFile = synced.sync
	sm := newFakeSM()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := testContext(t)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := n.Propose(ctx, []byte(fmt.Sprintf("k%d-%06d", g, i)))
				if errors.Is(err, ErrStopped) {
					return
				}
				if err != nil {
					t.Errorf("propose: %v", err)
					return
				}
			}
		}()
	}
	sm.waitPayloads(t, 300)
	appliedBeforeCrash := sm.payloads()

	crashDir := t.TempDir()
	copyCrashImage(t, filepath.Join(dir, "wal"), filepath.Join(crashDir, "wal"), synced)
	close(stop)
	wg.Wait()
	n.Stop()

	crashCfg := cfg
	crashCfg.DataDir = crashDir
	crashCfg.syncFile = nil
	logs := &logSink{}
	crashCfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	sm2 := newFakeSM()
	mustStart(t, crashCfg, sm2)
	logs.mu.Lock()
	repaired := strings.Contains(logs.buf.String(), "truncating torn WAL tail")
	logs.mu.Unlock()
	if !repaired {
		t.Fatal("restart did not repair a torn WAL tail; the crash image was not torn")
	}
	sm2.waitPayloads(t, len(appliedBeforeCrash))
	sm2.check(t)
	got := sm2.payloads()
	for i, p := range appliedBeforeCrash {
		if got[i] != p {
			t.Fatalf("after the crash, payload %d is %q; the crashed member had applied %q", i, got[i], p)
		}
	}
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] {
			t.Fatalf("payload %q applied twice after the crash", p)
		}
		seen[p] = true
	}
}

func copyCrashImage(t *testing.T, from, to string, synced *syncedSizes) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	names := walSegments(t, from)
	if len(names) < 2 {
		t.Fatalf("want several segments to crash across, have %v", names)
	}
	for i, name := range names {
		data, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		image := data[:min(int64(len(data)), synced.get(name)+37)]
		if i == len(names)-1 {
			// The crash also caught the file being extended: a
			// zero-filled tail, so that the image is always torn.
			image = append(image, make([]byte, 16)...)
		}
		if err := os.WriteFile(filepath.Join(to, name), image, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
