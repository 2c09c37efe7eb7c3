package server

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/internal/lease"
)

func TestRenewBatchCodec(t *testing.T) {
	ids := []int64{7, 9, -1, 1 << 62}
	got, err := decodeRenewBatch(encodeRenewBatch(ids))
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("round trip of %v: %v, %v", ids, got, err)
	}
	if got, err := decodeRenewBatch(nil); err != nil || len(got) != 0 {
		t.Fatalf("empty batch: %v, %v", got, err)
	}
	for _, bad := range [][]byte{{5, 8}, {0x80}, {2, 0xff, 0xff}} {
		if _, err := decodeRenewBatch(bad); err == nil {
			t.Errorf("decodeRenewBatch(%x) accepted", bad)
		}
	}
	// The example in forward_renew.go's comment.
	if want := []byte{2, 8, 7, 2, 8, 9}; !bytes.Equal(encodeRenewBatch([]int64{7, 9}), want) {
		t.Errorf("encodeRenewBatch(7, 9) = %x, want %x", encodeRenewBatch([]int64{7, 9}), want)
	}
}

// FuzzDecodeRenewBatch: batches arrive from the network; decoding never
// panics, and what decodes encodes back to a batch with the same IDs.
func FuzzDecodeRenewBatch(f *testing.F) {
	f.Add(encodeRenewBatch([]int64{1, 2, 3}))
	f.Add([]byte{})
	f.Add([]byte{0x80, 0x80})
	f.Add([]byte{3, 8, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		ids, err := decodeRenewBatch(data)
		if err != nil {
			return
		}
		again, err := decodeRenewBatch(encodeRenewBatch(ids))
		if err != nil || !slices.Equal(again, ids) {
			t.Fatalf("re-encoded %v decodes to %v, %v", ids, again, err)
		}
	})
}

// Keep-alives arriving at a follower together share forwarded batches, and
// each gets its own lease's answer from the leader.
func TestFollowerBatchesKeepAlives(t *testing.T) {
	ms := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	follower := testMembersExcept(ms, leaderOf(t, ms))[0]

	ttls := []int64{10, 20, 30, 40}
	var ids []int64
	for _, ttl := range ttls {
		g, err := follower.srv.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	unknown := ids[len(ids)-1] + 1000

	before := follower.srv.renewals.batches.Load()
	const rounds = 50
	var wg sync.WaitGroup
	errs := make(chan error, rounds*(len(ids)+1))
	for range rounds {
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if ttl, err := follower.srv.LeaseRenew(ctx, id); err != nil || ttl != ttls[i] {
					errs <- errors.Join(errors.New("renew: wrong answer"), err)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := follower.srv.LeaseRenew(ctx, unknown); !errors.Is(err, lease.ErrLeaseNotFound) {
				errs <- errors.Join(errors.New("renew of an unknown lease: want ErrLeaseNotFound"), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sent := follower.srv.renewals.batches.Load() - before
	if total := uint64(rounds * (len(ids) + 1)); sent == 0 || sent > total {
		t.Fatalf("%d keep-alives went in %d batches", total, sent)
	}
	t.Logf("%d keep-alives in %d forwarded batches", rounds*(len(ids)+1), sent)
}

// TestKeepAliveToLeaderOfEarlierBuild: a leader of an earlier build
// answers the batch method Unimplemented (it has no handler for it); the
// follower falls back to forwarding each keep-alive alone, so leases keep
// living through a rolling upgrade.
func TestKeepAliveToLeaderOfEarlierBuild(t *testing.T) {
	ms := startTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	leader := leaderOf(t, ms)
	follower := testMembersExcept(ms, leader)[0]
	var refused atomic.Int64
	if err := leader.srv.transport.RegisterForwardHandler(methodLeaseRenewBatch, func(context.Context, []byte) ([]byte, error) {
		refused.Add(1)
		return nil, status.Errorf(codes.Unimplemented, "no forward handler for method %q", methodLeaseRenewBatch)
	}); err != nil {
		t.Fatal(err)
	}
	g, err := follower.srv.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 30})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ttl, err := follower.srv.LeaseRenew(ctx, g.ID); err != nil || ttl != 30 {
				t.Errorf("keep-alive through a leader without batches: ttl %d, %v; want 30", ttl, err)
			}
		}()
	}
	wg.Wait()
	if _, err := follower.srv.LeaseRenew(ctx, g.ID+1000); !errors.Is(err, lease.ErrLeaseNotFound) {
		t.Errorf("keep-alive of an unknown lease through a leader without batches: %v, want ErrLeaseNotFound", err)
	}
	if refused.Load() == 0 {
		t.Fatal("the follower never tried the batch method: the test did not exercise the fallback")
	}
}
