package rocksdb_test

import (
	"log/slog"
	"testing"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/kvstore/backendtest"
	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
	"github.com/metastore-io/metastore/internal/rocksdb"
)

// newBackend opens an engine in a fresh directory with a small cache and
// tiny memtables, so the shared suites also cross flushes.
func newBackend(t *testing.T) kvstore.Backend {
	opts := rocksdb.DefaultOptions()
	opts.BlockCacheSize = 8 << 20
	opts.WriteBufferSize = 64 << 10
	opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := rocksdb.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

func TestBackendConformance(t *testing.T) {
	backendtest.Run(t, newBackend)
}

func TestStoreSuite(t *testing.T) {
	kvstoretest.Run(t, newBackend)
}
