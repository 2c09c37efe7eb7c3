package memory_test

import (
	"testing"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/kvstore/backendtest"
	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/test/etcddiff"
)

func newBackend(t *testing.T) kvstore.Backend {
	b := memory.New()
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

func TestAgainstEtcd(t *testing.T) {
	etcddiff.Run(t, newBackend)
}
