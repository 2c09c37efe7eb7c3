package raftnode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/metastore-io/metastore/internal/raftnode/wal"

	"github.com/metastore-io/metastore/test/raftkit"
)

// syncedSizes remembers, per WAL segment, how many bytes of records the
// last fsync made durable: what a power loss would leave of the file
// before its preallocated space.
type syncedSizes struct {
	mu sync.Mutex
	m  map[string]int64
}

func (s *syncedSizes) sync(f *os.File) error {
	if err := wal.SyncData(f); err != nil {
		return err
	}
	data, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	// A new segment's head is synced under its temporary name.
	name := strings.TrimSuffix(filepath.Base(f.Name()), ".tmp")
	s.mu.Lock()
	s.m[name] = recordsEnd(data)
	s.mu.Unlock()
	return nil
}

// recordsEnd is where a segment's records end and its preallocated
// (zero) space begins: the first record frame (length u32, crc u32,
// type u8, payload) whose header is all zeros, or the end of data.
func recordsEnd(data []byte) int64 {
	const header = 9
	off := 0
	for off+header <= len(data) && !bytes.Equal(data[off:off+header], make([]byte, header)) {
		off += header + int(binary.LittleEndian.Uint32(data[off:]))
	}
	return int64(min(off, len(data)))
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
	sm := raftkit.New()
	n := mustStart(t, cfg, sm)
	waitLeader(t, n)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := raftkit.Context(t)
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
	sm.WaitPayloads(t, 300)
	appliedBeforeCrash := sm.Payloads()

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
	sm2 := raftkit.New()
	mustStart(t, crashCfg, sm2)
	logs.mu.Lock()
	repaired := strings.Contains(logs.buf.String(), "truncating torn WAL tail")
	logs.mu.Unlock()
	if !repaired {
		t.Fatal("restart did not repair a torn WAL tail; the crash image was not torn")
	}
	sm2.WaitPayloads(t, len(appliedBeforeCrash))
	sm2.Check(t)
	got := sm2.Payloads()
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
		// The records synced, and a few bytes more that the crash may
		// have written.
		image := bytes.Clone(data[:min(int64(len(data)), synced.get(name)+37)])
		if i == len(names)-1 {
			// The crash also caught a record being written, so that
			// the image is always torn (a header promising 64 bytes
			// and part of them), and left the rest of the segment's
			// preallocated space as it was: zeros.
			image = append(image, 0x40, 0, 0, 0, 1, 2, 3, 4, 2, 7, 7, 7)
			image = append(image, make([]byte, max(0, len(data)-len(image)))...)
		}
		if err := os.WriteFile(filepath.Join(to, name), image, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
