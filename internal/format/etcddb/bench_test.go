package etcddb

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
)

// BenchmarkBuild converts a store of 100,000 keys (32-byte keys,
// 256-byte values) into an etcd database file: the work of `etcdctl
// snapshot save` against MetaStore before the first byte is sent.
func BenchmarkBuild(b *testing.B) {
	kv, err := kvstore.Open(memory.New(), kvstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	value := make([]byte, 256)
	for i := range 100_000 {
		if _, err := kv.Put(&pb.PutRequest{Key: fmt.Appendf(nil, "%032d", i), Value: value}); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			if _, err := kv.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := kv.Commit(); err != nil {
		b.Fatal(err)
	}
	view := kv.SnapshotView()
	defer view.Release()
	b.ResetTimer()
	for i := range b.N {
		db, err := Build(context.Background(), filepath.Join(b.TempDir(), fmt.Sprint(i)), view)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(db.Size())/1e6, "MB")
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
