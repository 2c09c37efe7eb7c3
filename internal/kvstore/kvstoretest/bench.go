package kvstoretest

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// benchKeys is the number of keys the read benchmarks preload, in
// benchPrefixes groups of keys sharing a prefix.
const (
	benchKeys     = 10000
	benchPrefixes = 100
)

func benchKey(i int) []byte {
	return fmt.Appendf(nil, "bench/%03d/%05d", i%benchPrefixes, i)
}

var benchValue = make([]byte, 128)

// Benchmarks runs the store's benchmarks on the engine newBackend makes:
// apply throughput (one put per commit, a hundred per commit, txns) and
// read latency (single key, a prefix of a hundred keys, a read-only txn,
// also in parallel).
func Benchmarks(b *testing.B, newBackend func(b *testing.B) kvstore.Backend) {
	open := func(b *testing.B) *kvstore.Store {
		s, err := kvstore.Open(newBackend(b), kvstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	commit := func(b *testing.B, s *kvstore.Store) {
		index, _ := s.ConsistentIndex()
		s.SetConsistentIndex(index+1, 1)
		if _, err := s.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	preloaded := func(b *testing.B) *kvstore.Store {
		s := open(b)
		for i := range benchKeys {
			if _, err := s.Put(&pb.PutRequest{Key: benchKey(i), Value: benchValue}); err != nil {
				b.Fatal(err)
			}
			if i%1000 == 999 {
				commit(b, s)
			}
		}
		commit(b, s)
		return s
	}

	b.Run("PutCommit", func(b *testing.B) {
		s := open(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := s.Put(&pb.PutRequest{Key: benchKey(i % benchKeys), Value: benchValue}); err != nil {
				b.Fatal(err)
			}
			commit(b, s)
		}
	})
	b.Run("Put100Commit", func(b *testing.B) {
		s := open(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			for j := range 100 {
				if _, err := s.Put(&pb.PutRequest{Key: benchKey((i*100 + j) % benchKeys), Value: benchValue}); err != nil {
					b.Fatal(err)
				}
			}
			commit(b, s)
		}
	})
	b.Run("TxnCompareAndPutCommit", func(b *testing.B) {
		s := preloaded(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			key := benchKey(i % benchKeys)
			req := &pb.TxnRequest{
				Compare: []*pb.Compare{{Key: key, Target: pb.Compare_VERSION, Result: pb.Compare_GREATER, TargetUnion: &pb.Compare_Version{}}},
				Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: key, Value: benchValue}}}},
			}
			resp, err := s.Txn(req)
			if err != nil || !resp.Succeeded {
				b.Fatalf("txn: %v, %v", resp, err)
			}
			commit(b, s)
		}
	})
	reads := []struct {
		name string
		req  func(i int) *pb.RangeRequest
		kvs  int
	}{
		{"RangeSingleKey", func(i int) *pb.RangeRequest { return &pb.RangeRequest{Key: benchKey(i % benchKeys)} }, 1},
		{"RangePrefix100", func(i int) *pb.RangeRequest {
			p := fmt.Appendf(nil, "bench/%03d/", i%benchPrefixes)
			end := append([]byte(nil), p...)
			end[len(end)-1]++
			return &pb.RangeRequest{Key: p, RangeEnd: end}
		}, benchKeys / benchPrefixes},
	}
	for _, rd := range reads {
		b.Run(rd.name, func(b *testing.B) {
			s := preloaded(b)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				resp, err := s.Range(rd.req(i))
				if err != nil || len(resp.Kvs) != rd.kvs {
					b.Fatalf("range: %d keys, %v", len(resp.GetKvs()), err)
				}
			}
		})
		b.Run(rd.name+"Parallel", func(b *testing.B) {
			s := preloaded(b)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					resp, err := s.Range(rd.req(i))
					if err != nil || len(resp.Kvs) != rd.kvs {
						b.Errorf("range: %d keys, %v", len(resp.GetKvs()), err)
						return
					}
				}
			})
		})
	}
	b.Run("ReadTxn", func(b *testing.B) {
		s := preloaded(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			key := benchKey(i % benchKeys)
			req := &pb.TxnRequest{
				Compare: []*pb.Compare{{Key: key, Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Version{Version: 1}}},
				Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: key}}}},
			}
			resp, err := s.ReadTxn(req)
			if err != nil || !resp.Succeeded {
				b.Fatalf("read txn: %v, %v", resp, err)
			}
		}
	})
}
