package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/lease"
)

func leaseKeys(t *testing.T, s *Server, ctx context.Context, id int64) []string {
	t.Helper()
	resp, err := s.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: id, Keys: true})
	if err != nil {
		t.Fatalf("TimeToLive(%x): %v", id, err)
	}
	var keys []string
	for _, k := range resp.Keys {
		keys = append(keys, string(k))
	}
	return keys
}

func mustPut(t *testing.T, s *Server, ctx context.Context, key string, id int64) {
	t.Helper()
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte("v"), Lease: id}); err != nil {
		t.Fatalf("put %s with lease %x: %v", key, id, err)
	}
}

func TestLeaseLifecycle(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Server-chosen ID; a TTL below the minimum is raised to it
	// (1.5 election timeouts of 100 ms, rounded up to 1 s).
	g, err := s.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 0})
	if err != nil {
		t.Fatal(err)
	}
	if g.ID <= 0 || g.TTL != 1 {
		t.Fatalf("grant = ID %x TTL %d, want a positive ID and TTL 1", g.ID, g.TTL)
	}
	if _, err := s.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 77, TTL: 60}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 77, TTL: 60}); !errors.Is(err, lease.ErrLeaseExists) {
		t.Fatalf("duplicate grant: %v", err)
	}
	if _, err := s.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: lease.MaxTTL + 1}); !errors.Is(err, lease.ErrLeaseTTLTooLarge) {
		t.Fatalf("grant above MaxTTL: %v", err)
	}

	mustPut(t, s, ctx, "k2", 77)
	mustPut(t, s, ctx, "k1", 77)
	mustPut(t, s, ctx, "k3", 77)
	mustPut(t, s, ctx, "k3", 0) // re-put without a lease detaches
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("x"), Lease: 78}); !errors.Is(err, kvstore.ErrLeaseNotFound) {
		t.Fatalf("put with unknown lease: %v", err)
	}
	if got := leaseKeys(t, s, ctx, 77); !slices.Equal(got, []string{"k1", "k2"}) {
		t.Fatalf("lease 77 keys %q", got)
	}
	ttl, err := s.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 77})
	if err != nil || ttl.GrantedTTL != 60 || ttl.TTL < 55 || ttl.TTL > 60 {
		t.Fatalf("TimeToLive = %+v, %v", ttl, err)
	}
	if got, err := s.LeaseRenew(ctx, 77); err != nil || got != 60 {
		t.Fatalf("renew = %d, %v", got, err)
	}
	if _, err := s.LeaseRenew(ctx, 78); !errors.Is(err, lease.ErrLeaseNotFound) {
		t.Fatalf("renew of unknown lease: %v", err)
	}
	ls, err := s.LeaseLeases(ctx, &pb.LeaseLeasesRequest{})
	if err != nil || len(ls.Leases) != 2 {
		t.Fatalf("leases = %v, %v", ls, err)
	}

	// Revoke deletes both keys in one revision and leaves k3.
	rev := s.Rev()
	r, err := s.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 77})
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.Revision != rev+1 || s.Rev() != rev+1 {
		t.Fatalf("revoke at revision %d (store %d), want %d", r.Header.Revision, s.Rev(), rev+1)
	}
	got, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l")})
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Key) != "k3" {
		t.Fatalf("after revoke: %v, %v", got, err)
	}
	if _, err := s.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 77}); !errors.Is(err, lease.ErrLeaseNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := s.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 77}); !errors.Is(err, lease.ErrLeaseNotFound) {
		t.Fatalf("TimeToLive of revoked lease: %v", err)
	}
}

// TestLeaseExpiresThroughRaft: an expired lease is revoked by the leader's
// expiry loop and its key disappears.
func TestLeaseExpiresThroughRaft(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := s.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 5, TTL: 1}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, ctx, "ephemeral", 5)
	// The lease disappears once the expiry loop's revoke has gone through
	// Raft and applied; nothing else revokes it.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := s.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 5})
		if errors.Is(err, lease.ErrLeaseNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("lease did not expire")
		}
	}
	got, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("ephemeral")})
	if err != nil || len(got.Kvs) != 0 {
		t.Fatalf("key of the expired lease: %v, %v", got, err)
	}
}

// TestLeasesSurviveRestart: leases and their keys come back after a
// restart that goes through a snapshot (SnapshotCount 50) and the log.
func TestLeasesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, testConfig(t, dir))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, id := range []int64{1, 2} {
		if _, err := s.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: 600}); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range 60 {
		key := fmt.Sprintf("key/%02d", i)
		mustPut(t, s, ctx, key, 1)
		want = append(want, key)
	}
	mustPut(t, s, ctx, "other", 2)
	s.Stop()

	s2 := startServer(t, testConfig(t, dir))
	defer s2.Stop()
	if got := leaseKeys(t, s2, ctx, 1); !slices.Equal(got, want) {
		t.Fatalf("lease 1 keys after restart: %d keys, want %d", len(got), len(want))
	}
	resp, err := s2.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: 2, Keys: true})
	if err != nil || resp.GrantedTTL != 600 || len(resp.Keys) != 1 {
		t.Fatalf("lease 2 after restart: %+v, %v", resp, err)
	}
	rev := s2.Rev()
	if _, err := s2.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := s2.Range(ctx, &pb.RangeRequest{Key: []byte("key/"), RangeEnd: []byte("key0"), CountOnly: true})
	if err != nil || got.Count != 0 || s2.Rev() != rev+1 {
		t.Fatalf("after revoke: count %d, rev %d -> %d, %v", got.Count, rev, s2.Rev(), err)
	}
}
