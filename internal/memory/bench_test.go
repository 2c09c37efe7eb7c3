package memory_test

import (
	"fmt"
	"testing"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
	"github.com/metastore-io/metastore/internal/memory"
)

func BenchmarkStore(b *testing.B) {
	kvstoretest.Benchmarks(b, func(*testing.B) kvstore.Backend { return memory.New() })
}

const benchKeys = 10000

func benchKey(i int) []byte { return fmt.Appendf(nil, "key/%06d", i) }

var benchValue = make([]byte, 128)

func preloaded(b *testing.B) *memory.Backend {
	m := memory.New()
	bt := m.NewBatch()
	for i := range benchKeys {
		bt.Put(benchKey(i), benchValue)
	}
	if err := bt.Commit(); err != nil {
		b.Fatal(err)
	}
	return m
}

func BenchmarkBatchCommit100(b *testing.B) {
	m := memory.New()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		bt := m.NewBatch()
		for j := range 100 {
			bt.Put(benchKey((i*100+j)%benchKeys), benchValue)
		}
		if err := bt.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	m := preloaded(b)
	v := m.ReadView()
	defer v.Release()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok, err := v.Get(benchKey(i % benchKeys)); !ok || err != nil {
			b.Fatalf("get: %v %v", ok, err)
		}
	}
}

func BenchmarkAscend100(b *testing.B) {
	m := preloaded(b)
	v := m.ReadView()
	defer v.Release()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		n := 0
		start := benchKey(i % (benchKeys - 100))
		if err := v.Ascend(start, nil, func(k, v []byte) bool { n++; return n < 100 }); err != nil || n != 100 {
			b.Fatalf("ascend: %d, %v", n, err)
		}
	}
}
