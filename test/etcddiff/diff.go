package etcddiff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/kvstore/kvstoretest"
)

// Environment variables that change the random runs.
const (
	// EnvSeed runs the random comparison with this one seed only.
	EnvSeed = "METASTORE_DIFF_SEED"
	// EnvOps sets the number of random requests per seed.
	EnvOps = "METASTORE_DIFF_OPS"
)

// Default random runs: these seeds, this many requests each (fewer with
// -short), with a full comparison of the state every checkEvery requests.
var defaultSeeds = []uint64{1, 2, 3}

const (
	defaultOps = 800
	shortOps   = 250
	checkEvery = 200
)

// diffLeases are granted on both sides in the random runs.
var diffLeases = []int64{0x10, 0x11}

// Run compares kvstore on the backends newBackend makes with the
// reference etcd: every kvstoretest scenario (checking the tables
// themselves) and random request streams. It skips when there is no
// reference binary (see EtcdBinary).
func Run(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	binary, ok := EtcdBinary()
	if !ok {
		t.Skipf("no reference etcd binary (looked for %q; `make tools` builds it, $%s overrides)", binary, EnvEtcdBinary)
	}
	t.Logf("reference etcd binary: %s", binary)
	t.Run("Scenarios", func(t *testing.T) {
		for _, sc := range kvstoretest.Scenarios() {
			t.Run(sc.Name, func(t *testing.T) {
				if sc.Deviation != "" {
					t.Skipf("deliberate difference from etcd: %s", sc.Deviation)
				}
				runScenario(t, startEtcd(t, binary), sc)
			})
		}
	})
	seeds, ops := defaultSeeds, defaultOps
	if testing.Short() {
		seeds, ops = seeds[:1], shortOps
	}
	if s := os.Getenv(EnvSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("$%s: %v", EnvSeed, err)
		}
		seeds = []uint64{seed}
	}
	if s := os.Getenv(EnvOps); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("$%s: %v", EnvOps, err)
		}
		ops = n
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("Random/seed=%d", seed), func(t *testing.T) {
			runRandom(t, startEtcd(t, binary), newBackend(t), seed, ops)
		})
	}
}

// runScenario checks a scenario's expected answers against etcd.
func runScenario(t *testing.T, e *etcd, sc kvstoretest.Scenario) {
	if err := e.grantLeases(sc.Leases); err != nil {
		t.Fatal(err)
	}
	for i, st := range sc.Steps {
		got, err := e.do(st.Req)
		if st.Err != nil {
			if !sameError(st.Err, err) {
				t.Fatalf("step %d %T{%v}: etcd says %v, the table %v", i, st.Req, st.Req, err, st.Err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d %T{%v}: etcd says %v, the table expects success", i, st.Req, st.Req, err)
		}
		if same, diff := kvstoretest.SameResponse(got, st.Want); !same {
			t.Fatalf("step %d %T{%v}: etcd's answer (got) differs from the table (want):%s", i, st.Req, st.Req, diff)
		}
	}
}

// runRandom sends the same random requests to etcd and to a store on b
// and compares every answer, then the whole state every checkEvery
// requests and at the end.
func runRandom(t *testing.T, e *etcd, b kvstore.Backend, seed uint64, ops int) {
	t.Logf("seed %d, %d requests (rerun: %s=%d)", seed, ops, EnvSeed, seed)
	if err := e.grantLeases(diffLeases); err != nil {
		t.Fatal(err)
	}
	// One key's old revisions per Commit: a compaction spreads over the
	// requests that follow it, and every answer and HashKV is compared
	// with etcd's while it is in progress.
	s, err := kvstore.Open(b, kvstore.Options{Leases: kvstoretest.NewLeases(diffLeases...), CompactionStep: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := &generator{rng: rand.New(rand.NewPCG(seed, 0x5eed)), leases: diffLeases, rev: s.Rev(), compactRev: s.CompactRev()}
	compactions := map[int64]bool{} // etcd caches the hashes taken at these
	answered, failed := map[string]int{}, map[string]int{}
	for i := range ops {
		req := g.request()
		if h, isHash := req.(hashKV); isHash {
			compareHashKV(t, e, s, h.rev, compactions, i)
			continue
		}
		ourReq, err := decoded(req)
		if err != nil {
			t.Fatal(err)
		}
		ours, ourErr := kvstoretest.Exec(s, ourReq)
		theirs, theirErr := e.do(req)
		kind := fmt.Sprintf("%T", req)[len("*etcdserverpb."):]
		if ourErr != nil {
			failed[kind]++
		} else {
			answered[kind]++
		}
		if ourErr != nil || theirErr != nil {
			if !sameError(ourErr, theirErr) {
				t.Fatalf("request %d %T{%v}:\n ours: %v\netcd: %v", i, req, req, ourErr, theirErr)
			}
		} else if same, diff := kvstoretest.SameResponse(ours, theirs); !same {
			t.Fatalf("request %d %T{%v}: ours (got) and etcd's (want) differ:%s", i, req, req, diff)
		}
		if c, isCompaction := req.(*pb.CompactionRequest); isCompaction && ourErr == nil {
			compactions[c.Revision] = true
		}
		g.rev, g.compactRev = s.Rev(), s.CompactRev()
		if i%checkEvery == checkEvery-1 || i == ops-1 {
			compareState(t, e, s, compactions, i)
		}
	}
	t.Logf("final revision %d, compacted at %d; answered %v, failed (identically) %v",
		s.Rev(), s.CompactRev(), answered, failed)
}

// compareHashKV compares HashKV at rev, unless rev is a revision etcd
// compacted at: etcd answers those from the hashes it took during the
// compaction (even rev 0 after a compaction at 0), kvstore does not.
func compareHashKV(t *testing.T, e *etcd, s *kvstore.Store, rev int64, compactions map[int64]bool, i int) {
	t.Helper()
	if compactions[rev] {
		return
	}
	ours, ourErr := s.HashKV(rev)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	theirs, theirErr := e.maint.HashKV(ctx, &pb.HashKVRequest{Revision: rev})
	if ourErr != nil || theirErr != nil {
		if !sameError(ourErr, theirErr) {
			t.Fatalf("request %d HashKV(%d):\n ours: %v\netcd: %v", i, rev, ourErr, theirErr)
		}
		return
	}
	want := kvstore.HashKVResult{Hash: theirs.Hash, Revision: theirs.Header.Revision, CompactRevision: theirs.CompactRevision, HashRevision: theirs.HashRevision}
	if ours != want {
		t.Fatalf("request %d HashKV(%d):\n ours: %+v\netcd: %+v", i, rev, ours, want)
	}
}

// compareState compares every readable revision of the key space, the
// hash and the event history (ours from Events, etcd's from a watch).
func compareState(t *testing.T, e *etcd, s *kvstore.Store, compactions map[int64]bool, i int) {
	t.Helper()
	first := max(s.CompactRev(), 1)
	for rev := first; rev <= s.Rev(); rev++ {
		req := &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev}
		ours, ourErr := s.Range(req)
		theirs, theirErr := e.do(req)
		if ourErr != nil || theirErr != nil {
			t.Fatalf("after request %d, full range at %d: ours %v, etcd %v", i, rev, ourErr, theirErr)
		}
		if same, diff := kvstoretest.SameResponse(ours, theirs); !same {
			t.Fatalf("after request %d, full range at %d:%s", i, rev, diff)
		}
		compareHashKV(t, e, s, rev, compactions, i)
	}
	compareHashKV(t, e, s, 0, compactions, i)

	events, _, err := s.Events(first, 0, []byte{0}, []byte{0}, 0)
	if err != nil {
		t.Fatalf("after request %d: events: %v", i, err)
	}
	theirs, err := e.history(first, s.Rev())
	if err != nil {
		t.Fatalf("after request %d: etcd's history: %v", i, err)
	}
	ours := &pb.WatchResponse{}
	for j := range events {
		ours.Events = append(ours.Events, &events[j])
	}
	if same, diff := kvstoretest.SameResponse(ours, &pb.WatchResponse{Events: theirs}); !same {
		t.Fatalf("after request %d, events from %d: ours (got) and etcd's watch (want) differ:%s", i, first, diff)
	}
}

// history watches every key from start until it has seen the events of
// revision last, and returns them.
func (e *etcd) history(start, last int64) ([]*mvccpb.Event, error) {
	if start > last {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	stream, err := e.watch.Watch(ctx)
	if err != nil {
		return nil, fmt.Errorf("open watch stream: %w", err)
	}
	err = stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: start,
	}}})
	if err != nil {
		return nil, fmt.Errorf("create watch: %w", err)
	}
	var events []*mvccpb.Event
	for len(events) == 0 || events[len(events)-1].Kv.ModRevision < last {
		resp, err := stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("watch from %d (have %d events): %w", start, len(events), err)
		}
		if resp.Canceled || resp.CompactRevision != 0 {
			return nil, errors.New("watch canceled: " + resp.String())
		}
		events = append(events, resp.Events...)
	}
	return events, nil
}
