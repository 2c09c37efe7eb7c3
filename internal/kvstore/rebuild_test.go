package kvstore_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
	"github.com/metastore-io/metastore/internal/memory"
)

// TestPipelinedRebuildMatches drives a store through random puts (with
// and without leases), deletes, multi-key txns and compactions, and after
// every few commits checks that both ways of rebuilding the key index
// from the backend agree on every key's history.
func TestPipelinedRebuildMatches(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			s, err := kvstore.Open(memory.New(), kvstore.Options{Leases: kvstoretest.NewLeases(1, 2)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := kvstore.CompareRebuilds(s); err != nil {
				t.Fatalf("empty store: %v", err)
			}
			key := func() []byte { return fmt.Appendf(nil, "k%02d", rng.IntN(40)) }
			for step := range 600 {
				var err error
				switch op := rng.IntN(20); {
				case op < 10:
					_, err = s.Put(&pb.PutRequest{Key: key(), Value: []byte("v"), Lease: int64(rng.IntN(3))})
				case op < 14:
					_, err = s.DeleteRange(&pb.DeleteRangeRequest{Key: key()})
				case op < 15:
					_, err = s.DeleteRange(&pb.DeleteRangeRequest{Key: []byte("k1"), RangeEnd: []byte("k2")})
				case op < 19:
					txn := &pb.TxnRequest{}
					for i := range 1 + rng.IntN(4) {
						txn.Success = append(txn.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{
							RequestPut: &pb.PutRequest{Key: fmt.Appendf(nil, "t%d-%02d", i, rng.IntN(10)), Value: []byte("x")},
						}})
					}
					_, err = s.Txn(txn)
				default:
					if rev := s.Rev(); rev > 2 {
						_, err = s.Compact(max(s.CompactRev()+1, rev-int64(rng.IntN(20))))
					}
				}
				if err != nil && err != kvstore.ErrCompacted {
					t.Fatalf("step %d: %v", step, err)
				}
				if rng.IntN(3) == 0 {
					if _, err := s.Commit(); err != nil {
						t.Fatal(err)
					}
					if err := kvstore.CompareRebuilds(s); err != nil {
						t.Fatalf("after step %d: %v", step, err)
					}
				}
			}
		})
	}
}
