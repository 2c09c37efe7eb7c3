package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
)

const testTimeout = 60 * time.Second

// testClusterVersion is the version a test member's leader records
// (internal/member gives etcdcompat's).
const testClusterVersion = "3.6.0"

// testServerVersion is the server version a test member reports.
const testServerVersion = "3.6.16"

func testConfig(t *testing.T, dir string) Config {
	t.Helper()
	peer := "http://127.0.0.1:12380"
	return Config{
		ClusterVersion:      testClusterVersion,
		ServerVersion:       testServerVersion,
		Name:                "m1",
		DataDir:             dir,
		InitialCluster:      []membership.InitialMember{{Name: "m1", PeerURLs: []string{peer}}},
		InitialClusterToken: "test",
		NewCluster:          true,
		PeerURLs:            []string{peer},
		ClientURLs:          []string{"http://127.0.0.1:12379"},
		SnapshotCount:       50,
		MaxRequestBytes:     1536 * 1024,
		MaxTxnOps:           128,
		TickInterval:        10 * time.Millisecond,
		ElectionTicks:       10,
		Backend:             memory.New(),
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	select {
	case <-s.Ready():
	case <-time.After(testTimeout):
		s.Stop()
		t.Fatal("server not ready in time")
	}
	return s
}

func TestServerWritesReadsAndRestarts(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, testConfig(t, dir))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	// Concurrent writers: every acknowledged put must be readable, and the
	// revisions handed out must be unique.
	const writers, perWriter = 8, 40
	var mu sync.Mutex
	revs := map[int64]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				key := fmt.Sprintf("k/%d/%03d", w, i)
				resp, err := s.Put(ctx, &pb.PutRequest{Key: []byte(key), Value: []byte("v-" + key)})
				if err != nil {
					t.Errorf("put %s: %v", key, err)
					return
				}
				mu.Lock()
				if prev, dup := revs[resp.Header.Revision]; dup {
					t.Errorf("revision %d given to %s and %s", resp.Header.Revision, prev, key)
				}
				revs[resp.Header.Revision] = key
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	check := func(s *Server) {
		t.Helper()
		resp, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("k/"), RangeEnd: []byte("k0"), CountOnly: true})
		if err != nil {
			t.Fatalf("range: %v", err)
		}
		if resp.Count != writers*perWriter {
			t.Fatalf("count = %d, want %d", resp.Count, writers*perWriter)
		}
		got, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("k/3/007")})
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v-k/3/007" {
			t.Fatalf("get k/3/007 = %v, %v", got, err)
		}
	}
	check(s)
	rev := s.Rev()

	// Read-only txn is served without bumping the revision.
	tresp, err := s.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k/0/000")}}}}})
	if err != nil || !tresp.Succeeded || s.Rev() != rev {
		t.Fatalf("read-only txn: %v, %v, rev %d -> %d", tresp, err, rev, s.Rev())
	}

	// Past the snapshot count: a restart recovers from snapshot + log.
	s.Stop()
	cfg := testConfig(t, dir)
	s2 := startServer(t, cfg)
	defer s2.Stop()
	check(s2)
	if s2.Rev() != rev {
		t.Fatalf("revision after restart = %d, want %d", s2.Rev(), rev)
	}
	ms := s2.Members()
	if len(ms) != 1 || ms[0].MemberAttributes == nil || ms[0].MemberAttributes.Name != "m1" {
		t.Fatalf("member list after restart: %+v", ms)
	}
}

func TestServerErrors(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxRequestBytes = 1024
	s := startServer(t, cfg)
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("big"), Value: make([]byte, 2048)}); !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("oversized put: %v, want ErrRequestTooLarge", err)
	}
	if _, err := s.Put(ctx, &pb.PutRequest{Key: []byte("a"), Value: []byte("1"), Lease: 42}); !errors.Is(err, kvstore.ErrLeaseNotFound) {
		t.Fatalf("put with unknown lease: %v, want ErrLeaseNotFound", err)
	}
	if _, err := s.Range(ctx, &pb.RangeRequest{Key: []byte("a"), Revision: s.Rev() + 10}); !errors.Is(err, kvstore.ErrFutureRev) {
		t.Fatalf("future revision: %v, want ErrFutureRev", err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := s.Put(cctx, &pb.PutRequest{Key: []byte("a")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled put: %v, want context.Canceled", err)
	}
}

func TestResolveClusterRejectsMismatch(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.PeerURLs = []string{"http://127.0.0.1:9"}
	if _, err := newClusterIdentity(cfg); err == nil {
		t.Fatal("mismatched advertise peer URLs accepted")
	}
	cfg = testConfig(t, t.TempDir())
	cfg.Name = "absent"
	if _, err := newClusterIdentity(cfg); err == nil {
		t.Fatal("a name missing from --initial-cluster accepted")
	}
}
