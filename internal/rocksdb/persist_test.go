package rocksdb_test

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/internal/raftnode"
)

// TestStoreImagesPersistInPlace checks the seam between the three
// packages: a store on RocksDB hands raftnode images it may persist in
// place, a store on the memory engine images it must write out.
func TestStoreImagesPersistInPlace(t *testing.T) {
	cases := []struct {
		name    string
		backend kvstore.Backend
		inPlace bool
	}{
		{"rocksdb", newBackend(t), true},
		{"memory", memory.New(), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := kvstore.Open(c.backend, kvstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Put(&pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
			s.SetConsistentIndex(7, 1)
			if _, err := s.Commit(); err != nil {
				t.Fatal(err)
			}
			view := s.SnapshotView()
			img, ok := view.(raftnode.PersistentImage)
			if !ok {
				t.Fatalf("%T does not implement raftnode.PersistentImage", view)
			}
			if got := img.PersistsInPlace(); got != c.inPlace {
				t.Fatalf("PersistsInPlace = %v, want %v", got, c.inPlace)
			}
			err = img.Persist()
			if c.inPlace && err != nil {
				t.Fatalf("Persist: %v", err)
			}
			if !c.inPlace && err == nil {
				t.Fatal("Persist of an in-memory image succeeded")
			}
			img.Release()
			if err := img.Persist(); err == nil {
				t.Fatal("Persist after Release succeeded")
			}
		})
	}
}
