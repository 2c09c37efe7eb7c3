package e2e

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

func TestPutGetDeleteRevisions(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	// A fresh store is at revision 1; every write bumps it by one.
	empty := mustGet(ctx, t, s.cli, "foo")
	requireHeader(t, empty.Header, 1)
	if len(empty.Kvs) != 0 || empty.Count != 0 || empty.More {
		t.Fatalf("get on empty store: kvs=%v count=%d more=%v", empty.Kvs, empty.Count, empty.More)
	}

	put := mustPut(ctx, t, s.cli, "foo", "bar")
	requireHeader(t, put.Header, 2)
	if put.PrevKv != nil {
		t.Fatalf("put without prev_kv returned prev_kv %v", put.PrevKv)
	}
	got := mustGet(ctx, t, s.cli, "foo")
	requireHeader(t, got.Header, 2)
	if got.Count != 1 || got.More || len(got.Kvs) != 1 {
		t.Fatalf("get foo: count=%d more=%v kvs=%d", got.Count, got.More, len(got.Kvs))
	}
	requireKV(t, got.Kvs[0], mvccpb.KeyValue{Key: []byte("foo"), Value: []byte("bar"), CreateRevision: 2, ModRevision: 2, Version: 1})

	requireHeader(t, mustPut(ctx, t, s.cli, "foo", "baz").Header, 3)
	got = mustGet(ctx, t, s.cli, "foo")
	requireKV(t, got.Kvs[0], mvccpb.KeyValue{Key: []byte("foo"), Value: []byte("baz"), CreateRevision: 2, ModRevision: 3, Version: 2})

	// A serializable read of a single member sees the same committed state.
	ser := mustGet(ctx, t, s.cli, "foo", clientv3.WithSerializable())
	requireHeader(t, ser.Header, 3)
	requireKV(t, ser.Kvs[0], mvccpb.KeyValue{Key: []byte("foo"), Value: []byte("baz"), CreateRevision: 2, ModRevision: 3, Version: 2})

	del, err := s.cli.Delete(ctx, "foo")
	if err != nil {
		t.Fatalf("delete foo: %v", err)
	}
	requireHeader(t, del.Header, 4)
	if del.Deleted != 1 {
		t.Fatalf("deleted %d, want 1", del.Deleted)
	}
	got = mustGet(ctx, t, s.cli, "foo")
	requireHeader(t, got.Header, 4)
	if len(got.Kvs) != 0 || got.Count != 0 {
		t.Fatalf("get after delete: kvs=%v count=%d", got.Kvs, got.Count)
	}

	// Re-creating a deleted key starts a new generation: version 1 and a
	// new create revision.
	requireHeader(t, mustPut(ctx, t, s.cli, "foo", "again").Header, 5)
	got = mustGet(ctx, t, s.cli, "foo")
	requireKV(t, got.Kvs[0], mvccpb.KeyValue{Key: []byte("foo"), Value: []byte("again"), CreateRevision: 5, ModRevision: 5, Version: 1})

	// Binary keys and values, including empty values, round-trip unchanged.
	binKey, binValue := "\x00\xff\x01key", "\x00\x01\xfe"
	mustPut(ctx, t, s.cli, binKey, binValue)
	mustPut(ctx, t, s.cli, "empty-value", "")
	got = mustGet(ctx, t, s.cli, binKey)
	requireKV(t, got.Kvs[0], mvccpb.KeyValue{Key: []byte(binKey), Value: []byte(binValue), CreateRevision: 6, ModRevision: 6, Version: 1})
	got = mustGet(ctx, t, s.cli, "empty-value")
	requireKV(t, got.Kvs[0], mvccpb.KeyValue{Key: []byte("empty-value"), CreateRevision: 7, ModRevision: 7, Version: 1})
}

func TestRangeKindsLimitAndCount(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	all := []string{"a", "b", "c", "foo", "foo/1", "foo/2", "fop", "z"}
	for _, k := range all {
		mustPut(ctx, t, s.cli, k, "v-"+k)
	}
	rev := int64(1 + len(all))

	tests := []struct {
		name string
		key  string
		opts []clientv3.OpOption
		want []string
	}{
		{"single key", "foo", nil, []string{"foo"}},
		{"missing key", "fo", nil, nil},
		{"prefix", "foo", []clientv3.OpOption{clientv3.WithPrefix()}, []string{"foo", "foo/1", "foo/2"}},
		{"from key", "foo/1", []clientv3.OpOption{clientv3.WithFromKey()}, []string{"foo/1", "foo/2", "fop", "z"}},
		{"half-open interval", "b", []clientv3.OpOption{clientv3.WithRange("foo/1")}, []string{"b", "c", "foo"}},
		{"empty interval", "c", []clientv3.OpOption{clientv3.WithRange("c")}, nil},
		{"inverted interval", "z", []clientv3.OpOption{clientv3.WithRange("a")}, nil},
		{"all keys via from-key", "\x00", []clientv3.OpOption{clientv3.WithFromKey()}, all},
		{"all keys via empty prefix", "", []clientv3.OpOption{clientv3.WithPrefix()}, all},
	}
	for _, tc := range tests {
		resp := mustGet(ctx, t, s.cli, tc.key, tc.opts...)
		requireHeader(t, resp.Header, rev)
		if got := keysOf(resp.Kvs); !equalStrings(got, tc.want) {
			t.Errorf("%s: got keys %q, want %q", tc.name, got, tc.want)
		}
		if resp.Count != int64(len(tc.want)) || resp.More {
			t.Errorf("%s: count=%d more=%v, want count=%d more=false", tc.name, resp.Count, resp.More, len(tc.want))
		}
		for _, kv := range resp.Kvs {
			if string(kv.Value) != "v-"+string(kv.Key) {
				t.Errorf("%s: key %q has value %q", tc.name, kv.Key, kv.Value)
			}
		}
	}

	// Limit truncates in key order; more says whether keys were left out
	// and count is always the size of the whole range.
	for _, tc := range []struct {
		limit    int64
		wantKeys []string
		wantMore bool
	}{
		{1, all[:1], true},
		{2, all[:2], true},
		{int64(len(all) - 1), all[:len(all)-1], true},
		{int64(len(all)), all, false},
		{int64(len(all) + 5), all, false},
	} {
		resp := mustGet(ctx, t, s.cli, "", clientv3.WithPrefix(), clientv3.WithLimit(tc.limit))
		if got := keysOf(resp.Kvs); !equalStrings(got, tc.wantKeys) || resp.More != tc.wantMore || resp.Count != int64(len(all)) {
			t.Errorf("limit %d: keys=%q more=%v count=%d, want keys=%q more=%v count=%d",
				tc.limit, got, resp.More, resp.Count, tc.wantKeys, tc.wantMore, len(all))
		}
	}

	countOnly := mustGet(ctx, t, s.cli, "foo", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if len(countOnly.Kvs) != 0 || countOnly.Count != 3 || countOnly.More {
		t.Errorf("count_only: kvs=%d count=%d more=%v, want 0 kvs, count 3", len(countOnly.Kvs), countOnly.Count, countOnly.More)
	}
	requireHeader(t, countOnly.Header, rev)

	keysOnly := mustGet(ctx, t, s.cli, "foo", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	requireKeys(t, keysOnly.Kvs, "foo", "foo/1", "foo/2")
	for i, kv := range keysOnly.Kvs {
		// Revisions of "a","b","c" are 2..4, so "foo" is at revision 5.
		r := int64(5 + i)
		requireKV(t, kv, mvccpb.KeyValue{Key: kv.Key, CreateRevision: r, ModRevision: r, Version: 1})
	}
}

func TestRangeAtRevision(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)

	mustPut(ctx, t, s.cli, "k", "v1")                 // rev 2
	mustPut(ctx, t, s.cli, "k", "v2")                 // rev 3
	mustPut(ctx, t, s.cli, "other", "o")              // rev 4
	if _, err := s.cli.Delete(ctx, "k"); err != nil { // rev 5
		t.Fatalf("delete: %v", err)
	}
	const head = 5

	tests := []struct {
		rev  int64
		want *mvccpb.KeyValue
	}{
		{1, nil},
		{2, &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v1"), CreateRevision: 2, ModRevision: 2, Version: 1}},
		{3, &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v2"), CreateRevision: 2, ModRevision: 3, Version: 2}},
		{4, &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v2"), CreateRevision: 2, ModRevision: 3, Version: 2}},
		{5, nil},
	}
	for _, tc := range tests {
		for _, serializable := range []bool{false, true} {
			resp := mustRange(ctx, t, s.kv, &pb.RangeRequest{Key: []byte("k"), Revision: tc.rev, Serializable: serializable})
			// The header carries the store's current revision, not the one read.
			requireHeader(t, resp.Header, head)
			if tc.want == nil {
				if len(resp.Kvs) != 0 || resp.Count != 0 {
					t.Fatalf("rev %d: got %v count %d, want nothing", tc.rev, resp.Kvs, resp.Count)
				}
				continue
			}
			if len(resp.Kvs) != 1 || resp.Count != 1 {
				t.Fatalf("rev %d: got %d kvs count %d, want 1", tc.rev, len(resp.Kvs), resp.Count)
			}
			requireKV(t, resp.Kvs[0], *tc.want)
		}
	}

	// A past read of a whole range sees the keys that existed then.
	resp := mustRange(ctx, t, s.kv, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: 3})
	requireKeys(t, resp.Kvs, "k")
	resp = mustRange(ctx, t, s.kv, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: 4})
	requireKeys(t, resp.Kvs, "k", "other")

	for _, serializable := range []bool{false, true} {
		_, err := s.kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: head + 1, Serializable: serializable})
		requireRPCError(t, err, rpctypes.ErrGRPCFutureRev)
		_, err = s.kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Revision: head + 1000, Serializable: serializable})
		requireRPCError(t, err, rpctypes.ErrGRPCFutureRev)
	}
}

// sortFixture builds three keys whose five sort targets all order them
// differently:
//
//	key  create mod version value
//	s/a     4    7     2     "a"
//	s/b     6    6     1     "z"
//	s/c     2    5     3     "m"
//
// so KEY sorts a,b,c; VERSION b,a,c; CREATE c,a,b; MOD c,b,a; VALUE a,c,b.
func sortFixture(t *testing.T, s *server) {
	t.Helper()
	ctx := testContext(t, testTimeout)
	for _, kv := range [][2]string{
		{"s/c", "c1"}, // rev 2
		{"s/c", "c2"}, // rev 3
		{"s/a", "x"},  // rev 4
		{"s/c", "m"},  // rev 5
		{"s/b", "z"},  // rev 6
		{"s/a", "a"},  // rev 7
	} {
		mustPut(ctx, t, s.cli, kv[0], kv[1])
	}
}

func TestRangeSort(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	sortFixture(t, s)
	ctx := testContext(t, testTimeout)

	ascending := map[pb.RangeRequest_SortTarget][]string{
		pb.RangeRequest_KEY:     {"s/a", "s/b", "s/c"},
		pb.RangeRequest_VERSION: {"s/b", "s/a", "s/c"},
		pb.RangeRequest_CREATE:  {"s/c", "s/a", "s/b"},
		pb.RangeRequest_MOD:     {"s/c", "s/b", "s/a"},
		pb.RangeRequest_VALUE:   {"s/a", "s/c", "s/b"},
	}
	// With order NONE etcd applies the limit while reading in key order
	// (fetching limit+1 keys to compute more) and only then sorts what it
	// read by the target: limit 1 sorts {s/a, s/b} and keeps the first.
	noneOrderLimit1 := map[pb.RangeRequest_SortTarget][]string{
		pb.RangeRequest_KEY:     {"s/a"},
		pb.RangeRequest_VERSION: {"s/b"}, // versions 2, 1
		pb.RangeRequest_CREATE:  {"s/a"}, // create revisions 4, 6
		pb.RangeRequest_MOD:     {"s/b"}, // mod revisions 7, 6
		pb.RangeRequest_VALUE:   {"s/a"}, // values "a", "z"
	}
	for target, asc := range ascending {
		desc := []string{asc[2], asc[1], asc[0]}
		for order, want := range map[pb.RangeRequest_SortOrder][]string{
			// NONE returns key order for KEY and, by etcd's rule, ascending
			// order of the target for every other target.
			pb.RangeRequest_NONE:    asc,
			pb.RangeRequest_ASCEND:  asc,
			pb.RangeRequest_DESCEND: desc,
		} {
			req := &pb.RangeRequest{Key: []byte("s/"), RangeEnd: []byte("s0"), SortTarget: target, SortOrder: order}
			resp := mustRange(ctx, t, s.kv, req)
			if got := keysOf(resp.Kvs); !equalStrings(got, want) || resp.Count != 3 || resp.More {
				t.Errorf("sort %s %s: keys=%q count=%d more=%v, want %q count=3 more=false", target, order, got, resp.Count, resp.More, want)
			}
			// An explicit order sorts the whole range, then applies the limit.
			wantLimited := want[:1]
			if order == pb.RangeRequest_NONE {
				wantLimited = noneOrderLimit1[target]
			}
			req.Limit = 1
			resp = mustRange(ctx, t, s.kv, req)
			if got := keysOf(resp.Kvs); !equalStrings(got, wantLimited) || resp.Count != 3 || !resp.More {
				t.Errorf("sort %s %s limit 1: keys=%q count=%d more=%v, want %q count=3 more=true", target, order, got, resp.Count, resp.More, wantLimited)
			}
		}
	}

	// clientv3's WithSort goes through the same server path.
	resp := mustGet(ctx, t, s.cli, "s/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend))
	requireKeys(t, resp.Kvs, "s/a", "s/b", "s/c")

	_, err := s.kv.Range(ctx, &pb.RangeRequest{Key: []byte("s/"), SortOrder: 7})
	requireRPCError(t, err, rpctypes.ErrGRPCInvalidSortOption)
	_, err = s.kv.Range(ctx, &pb.RangeRequest{Key: []byte("s/"), SortTarget: 9})
	requireRPCError(t, err, rpctypes.ErrGRPCInvalidSortOption)
}

func TestRangeRevisionFilters(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	sortFixture(t, s)
	ctx := testContext(t, testTimeout)

	tests := []struct {
		name string
		req  *pb.RangeRequest
		want []string
	}{
		{"min mod 6", &pb.RangeRequest{MinModRevision: 6}, []string{"s/a", "s/b"}},
		{"max mod 5", &pb.RangeRequest{MaxModRevision: 5}, []string{"s/c"}},
		{"mod 6..6", &pb.RangeRequest{MinModRevision: 6, MaxModRevision: 6}, []string{"s/b"}},
		{"min create 4", &pb.RangeRequest{MinCreateRevision: 4}, []string{"s/a", "s/b"}},
		{"max create 4", &pb.RangeRequest{MaxCreateRevision: 4}, []string{"s/a", "s/c"}},
		{"create 3..5", &pb.RangeRequest{MinCreateRevision: 3, MaxCreateRevision: 5}, []string{"s/a"}},
		{"nothing matches", &pb.RangeRequest{MinModRevision: 8}, nil},
	}
	for _, tc := range tests {
		tc.req.Key, tc.req.RangeEnd = []byte("s/"), []byte("s0")
		resp := mustRange(ctx, t, s.kv, tc.req)
		// etcd counts the range before the revision filters apply, so
		// count stays at 3 whatever the filters keep.
		if got := keysOf(resp.Kvs); !equalStrings(got, tc.want) || resp.Count != 3 {
			t.Errorf("%s: keys=%q count=%d, want %q count=3", tc.name, got, resp.Count, tc.want)
		}
		// With a limit the filters still see every key: limit applies last.
		tc.req.Limit = 1
		resp = mustRange(ctx, t, s.kv, tc.req)
		wantMore := len(tc.want) > 1
		wantLimited := tc.want
		if len(wantLimited) > 1 {
			wantLimited = wantLimited[:1]
		}
		if got := keysOf(resp.Kvs); !equalStrings(got, wantLimited) || resp.More != wantMore {
			t.Errorf("%s limit 1: keys=%q more=%v, want %q more=%v", tc.name, got, resp.More, wantLimited, wantMore)
		}
	}
}
