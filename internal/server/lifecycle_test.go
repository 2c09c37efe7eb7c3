package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metastore-io/metastore/internal/rocksdb"
)

// listen opens a loopback listener the member will own.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A member (serving peers) and a 3-member cluster, started and stopped
// over and over in one process, leave nothing running: every goroutine,
// listener and connection a member starts ends by the time Stop returns.
// (internal/member checks the same with etcd's client services.)
func TestStartStopLeavesNothingRunning(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for range 4 {
		cfg := testConfig(t, t.TempDir())
		peer := listen(t)
		cfg.PeerURLs = []string{"http://" + peer.Addr().String()}
		cfg.InitialCluster[0].PeerURLs = cfg.PeerURLs
		cfg.PeerListeners = []net.Listener{peer}
		s := startServer(t, cfg)
		mustPut(t, s, ctx, "k", 0)
		s.Stop()
	}
	for range 2 {
		ms := startTestCluster(t, 3)
		mustPut(t, leaderOf(t, ms).srv, ctx, "k", 0)
		for _, m := range ms {
			m.stop()
		}
	}
}

// A defragmentation racing Stop ends cleanly: Stop waits for the
// engine's compaction before closing the engine (no "read views or
// operations still open"), and a defragmentation asked for once the
// member stops is refused with ErrStopped.
func TestDefragmentRacingStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for i := range 3 {
		dir := t.TempDir()
		backend, err := rocksdb.Open(filepath.Join(dir, "member", "rocksdb"), rocksdb.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		var logs syncBuffer
		cfg := testConfig(t, dir)
		cfg.Backend = backend
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		s := startServer(t, cfg)
		for range 20 {
			mustPut(t, s, ctx, "k", 0)
		}
		defragged := make(chan error, 1)
		go func() {
			// The first round gives up at once: the compaction goes on
			// without its caller, and Stop must still wait for it.
			dctx := ctx
			if i == 0 {
				var dcancel context.CancelFunc
				dctx, dcancel = context.WithTimeout(ctx, time.Microsecond)
				defer dcancel()
			}
			defragged <- s.Defragment(dctx)
		}()
		s.Stop()
		if err := <-defragged; err != nil && !errors.Is(err, ErrStopped) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Defragment racing Stop: %v", err)
		}
		if err := s.Defragment(ctx); !errors.Is(err, ErrStopped) {
			t.Fatalf("Defragment after Stop: %v, want ErrStopped", err)
		}
		if out := logs.String(); strings.Contains(out, "still open") || strings.Contains(out, "close backend") {
			t.Fatalf("the engine was closed under a defragmentation:\n%s", out)
		}
	}
}
