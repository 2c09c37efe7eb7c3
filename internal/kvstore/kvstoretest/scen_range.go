package kvstoretest

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// Scenarios returns every scenario, fresh (callers may modify them).
func Scenarios() []Scenario {
	return []Scenario{
		rangeBasics(),
		rangeSortFilter(),
		rangeSortManyTies(),
		putOptions(),
		deleteRanges(),
		txnCompares(),
		txnWrites(),
		txnLimits(),
		txnIgnoreAfterDelete(),
		compaction(),
		compactionEmptyStore(),
		compactionTombstone(),
		compactionOfRecreatedKey(),
	}
}

func rangeBasics() Scenario {
	a := func() *mvccpb.KeyValue { return kv("a", "5", 2, 6, 2) }
	a1 := func() *mvccpb.KeyValue { return kv("a", "1", 2, 2, 1) }
	ab := func() *mvccpb.KeyValue { return kv("ab", "2", 3, 3, 1) }
	b := func() *mvccpb.KeyValue { return kv("b", "3", 4, 4, 1) }
	c := func() *mvccpb.KeyValue { return kv("c", "4", 5, 5, 1) }
	limited := func(r *pb.RangeRequest, n int64) *pb.RangeRequest { r.Limit = n; return r }
	keysOnly := func(r *pb.RangeRequest) *pb.RangeRequest { r.KeysOnly = true; return r }
	countOnly := func(r *pb.RangeRequest) *pb.RangeRequest { r.CountOnly = true; return r }
	return Scenario{Name: "RangeBasics", Steps: []Step{
		ok(put("a", "1"), putResp(2, nil)),
		ok(put("ab", "2"), putResp(3, nil)),
		ok(put("b", "3"), putResp(4, nil)),
		ok(put("c", "4"), putResp(5, nil)),
		ok(put("a", "5"), putResp(6, nil)),
		ok(get("a"), found(6, a())),
		ok(get("z"), rangeResp(6, 0, false)),
		ok(span("a", "c"), found(6, a(), ab(), b())),
		ok(span("a", "b"), found(6, a(), ab())),
		ok(span("ab", "\x00"), found(6, ab(), b(), c())),
		ok(all(), found(6, a(), ab(), b(), c())),
		ok(limited(span("a", "c"), 2), rangeResp(6, 3, true, a(), ab())),
		ok(limited(span("a", "c"), 3), found(6, a(), ab(), b())),
		ok(limited(span("a", "c"), 10), found(6, a(), ab(), b())),
		ok(limited(span("a", "c"), -1), found(6, a(), ab(), b())),
		ok(at(all(), 2), found(6, a1())),
		ok(at(all(), 4), found(6, a1(), ab(), b())),
		fail(at(all(), 7), kvstore.ErrFutureRev),
		ok(at(all(), -1), found(6, a(), ab(), b(), c())),
		ok(keysOnly(all()), found(6, noValue(a()), noValue(ab()), noValue(b()), noValue(c()))),
		ok(keysOnly(limited(all(), 1)), rangeResp(6, 4, true, noValue(a()))),
		ok(countOnly(all()), rangeResp(6, 4, false)),
		ok(countOnly(limited(all(), 1)), rangeResp(6, 4, false)),
		ok(countOnly(at(all(), 2)), rangeResp(6, 1, false)),
		ok(at(get("b"), 3), rangeResp(6, 0, false)),
		ok(span("c", "a"), rangeResp(6, 0, false)),
		ok(span("b", "b"), rangeResp(6, 0, false)),
		fail(get(""), kvstore.ErrEmptyKey),
		fail(at(get("a"), 100), kvstore.ErrFutureRev),
	}}
}

func rangeSortFilter() Scenario {
	a := func() *mvccpb.KeyValue { return kv("a", "w", 2, 5, 2) }
	b := func() *mvccpb.KeyValue { return kv("b", "u", 3, 7, 3) }
	c := func() *mvccpb.KeyValue { return kv("c", "x", 4, 4, 1) }
	d := func() *mvccpb.KeyValue { return kv("d", "x", 8, 8, 1) }
	sorted := func(order pb.RangeRequest_SortOrder, target pb.RangeRequest_SortTarget) *pb.RangeRequest {
		r := all()
		r.SortOrder, r.SortTarget = order, target
		return r
	}
	with := func(r *pb.RangeRequest, f func(r *pb.RangeRequest)) *pb.RangeRequest { f(r); return r }
	const (
		none = pb.RangeRequest_NONE
		asc  = pb.RangeRequest_ASCEND
		desc = pb.RangeRequest_DESCEND
	)
	// Ties keep the key order: etcd uses sort.Sort, whose insertion sort
	// for short inputs is stable (descending sorts use sort.Reverse).
	return Scenario{Name: "RangeSortFilter", Steps: []Step{
		ok(put("a", "z"), putResp(2, nil)),
		ok(put("b", "y"), putResp(3, nil)),
		ok(put("c", "x"), putResp(4, nil)),
		ok(put("a", "w"), putResp(5, nil)),
		ok(put("b", "v"), putResp(6, nil)),
		ok(put("b", "u"), putResp(7, nil)),
		ok(put("d", "x"), putResp(8, nil)),
		ok(sorted(desc, pb.RangeRequest_KEY), found(8, d(), c(), b(), a())),
		ok(sorted(asc, pb.RangeRequest_KEY), found(8, a(), b(), c(), d())),
		ok(sorted(none, pb.RangeRequest_VERSION), found(8, c(), d(), a(), b())),
		ok(sorted(desc, pb.RangeRequest_VERSION), found(8, b(), a(), c(), d())),
		ok(sorted(asc, pb.RangeRequest_CREATE), found(8, a(), b(), c(), d())),
		ok(sorted(desc, pb.RangeRequest_CREATE), found(8, d(), c(), b(), a())),
		ok(sorted(asc, pb.RangeRequest_MOD), found(8, c(), a(), b(), d())),
		ok(sorted(desc, pb.RangeRequest_MOD), found(8, d(), b(), a(), c())),
		ok(sorted(asc, pb.RangeRequest_VALUE), found(8, b(), a(), c(), d())),
		ok(sorted(desc, pb.RangeRequest_VALUE), found(8, c(), d(), a(), b())),
		ok(sorted(none, pb.RangeRequest_VALUE), found(8, b(), a(), c(), d())),
		ok(with(sorted(desc, pb.RangeRequest_MOD), func(r *pb.RangeRequest) { r.Limit = 2 }), rangeResp(8, 4, true, d(), b())),
		ok(with(sorted(asc, pb.RangeRequest_KEY), func(r *pb.RangeRequest) { r.Limit = 2 }), rangeResp(8, 4, true, a(), b())),
		ok(with(all(), func(r *pb.RangeRequest) { r.MinModRevision = 5 }), rangeResp(8, 4, false, a(), b(), d())),
		ok(with(all(), func(r *pb.RangeRequest) { r.MaxModRevision = 5 }), rangeResp(8, 4, false, a(), c())),
		ok(with(all(), func(r *pb.RangeRequest) { r.MinCreateRevision, r.MaxCreateRevision = 3, 4 }), rangeResp(8, 4, false, b(), c())),
		ok(with(all(), func(r *pb.RangeRequest) { r.MinModRevision, r.Limit = 5, 1 }), rangeResp(8, 4, true, a())),
		ok(with(all(), func(r *pb.RangeRequest) { r.MinModRevision, r.Limit = 5, 3 }), rangeResp(8, 4, false, a(), b(), d())),
		ok(with(all(), func(r *pb.RangeRequest) { r.MinModRevision, r.CountOnly = 5, true }), rangeResp(8, 4, false)),
		ok(with(sorted(desc, pb.RangeRequest_VERSION), func(r *pb.RangeRequest) { r.MaxCreateRevision = 4 }), rangeResp(8, 4, false, b(), a(), c())),
		ok(with(sorted(desc, pb.RangeRequest_VALUE), func(r *pb.RangeRequest) { r.KeysOnly = true }),
			found(8, noValue(c()), noValue(d()), noValue(a()), noValue(b()))),
		ok(at(sorted(asc, pb.RangeRequest_MOD), 4), found(8, kv("a", "z", 2, 2, 1), kv("b", "y", 3, 3, 1), c())),
		fail(sorted(7, pb.RangeRequest_KEY), kvstore.ErrInvalidSortOption),
		fail(sorted(asc, 9), kvstore.ErrInvalidSortOption),
	}}
}

// rangeSortManyTies sorts 20 keys with many equal values and versions.
// Beyond 12 elements sort.Sort is no longer a stable insertion sort: the
// orders below are etcd's, ties and all.
func rangeSortManyTies() Scenario {
	values := []string{"x", "y", "z"}
	item := func(i int) *mvccpb.KeyValue {
		if i%4 == 0 { // put twice
			return kv(fmt.Sprintf("k%02d", i), values[i%3], int64(i+2), int64(22+i/4), 2)
		}
		return kv(fmt.Sprintf("k%02d", i), values[i%3], int64(i+2), int64(i+2), 1)
	}
	items := func(order ...int) []*mvccpb.KeyValue {
		var out []*mvccpb.KeyValue
		for _, i := range order {
			out = append(out, item(i))
		}
		return out
	}
	sorted := func(order pb.RangeRequest_SortOrder, target pb.RangeRequest_SortTarget, limit int64) *pb.RangeRequest {
		return &pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l"), SortOrder: order, SortTarget: target, Limit: limit}
	}
	var steps []Step
	for i := range 20 {
		steps = append(steps, ok(put(fmt.Sprintf("k%02d", i), values[i%3]), putResp(int64(i+2), nil)))
	}
	for i := 0; i < 20; i += 4 {
		steps = append(steps, ok(put(fmt.Sprintf("k%02d", i), values[i%3]), putResp(int64(22+i/4), nil)))
	}
	return Scenario{Name: "RangeSortManyTies", Steps: append(steps,
		ok(sorted(pb.RangeRequest_ASCEND, pb.RangeRequest_VALUE, 0),
			found(26, items(9, 18, 15, 3, 12, 0, 6, 10, 7, 4, 13, 16, 1, 19, 8, 5, 11, 14, 2, 17)...)),
		ok(sorted(pb.RangeRequest_DESCEND, pb.RangeRequest_VALUE, 0),
			found(26, items(8, 17, 2, 14, 11, 5, 10, 16, 19, 1, 7, 4, 13, 12, 3, 15, 0, 9, 18, 6)...)),
		ok(sorted(pb.RangeRequest_NONE, pb.RangeRequest_VERSION, 0),
			found(26, items(10, 1, 2, 3, 19, 5, 6, 7, 9, 18, 17, 11, 15, 13, 14, 0, 16, 12, 8, 4)...)),
		ok(sorted(pb.RangeRequest_DESCEND, pb.RangeRequest_VERSION, 0),
			found(26, items(8, 16, 12, 0, 4, 10, 2, 7, 5, 9, 3, 11, 6, 13, 14, 15, 1, 17, 18, 19)...)),
		ok(sorted(pb.RangeRequest_ASCEND, pb.RangeRequest_VALUE, 5),
			rangeResp(26, 20, true, items(9, 18, 15, 3, 12)...)),
	)}
}

func putOptions() Scenario {
	const lease, missing = 0x10, 0x99
	withOpts := func(key, value string, f func(p *pb.PutRequest)) *pb.PutRequest {
		p := put(key, value)
		f(p)
		return p
	}
	return Scenario{Name: "PutOptions", Leases: []int64{lease}, Steps: []Step{
		ok(withOpts("a", "1", func(p *pb.PutRequest) { p.PrevKv = true }), putResp(2, nil)),
		ok(withOpts("a", "2", func(p *pb.PutRequest) { p.PrevKv = true }), putResp(3, kv("a", "1", 2, 2, 1))),
		fail(withOpts("b", "", func(p *pb.PutRequest) { p.IgnoreValue = true }), kvstore.ErrKeyNotFound),
		fail(withOpts("b", "v", func(p *pb.PutRequest) { p.IgnoreLease = true }), kvstore.ErrKeyNotFound),
		fail(withOpts("a", "x", func(p *pb.PutRequest) { p.IgnoreValue = true }), kvstore.ErrValueProvided),
		fail(withOpts("a", "x", func(p *pb.PutRequest) { p.IgnoreLease, p.Lease = true, lease }), kvstore.ErrLeaseProvided),
		ok(withOpts("a", "3", func(p *pb.PutRequest) { p.Lease = lease }), putResp(4, nil)),
		ok(get("a"), found(4, withLease(kv("a", "3", 2, 4, 3), lease))),
		// ignore_value keeps the value but takes the request's lease (none).
		ok(withOpts("a", "", func(p *pb.PutRequest) { p.IgnoreValue = true }), putResp(5, nil)),
		ok(get("a"), found(5, kv("a", "3", 2, 5, 4))),
		ok(withOpts("a", "4", func(p *pb.PutRequest) { p.Lease = lease }), putResp(6, nil)),
		ok(withOpts("a", "5", func(p *pb.PutRequest) { p.IgnoreLease = true }), putResp(7, nil)),
		ok(withOpts("a", "", func(p *pb.PutRequest) { p.IgnoreValue, p.IgnoreLease, p.PrevKv = true, true, true }),
			putResp(8, withLease(kv("a", "5", 2, 7, 6), lease))),
		ok(get("a"), found(8, withLease(kv("a", "5", 2, 8, 7), lease))),
		fail(withOpts("c", "1", func(p *pb.PutRequest) { p.Lease = missing }), kvstore.ErrLeaseNotFound),
		// The lease is checked before the key.
		fail(withOpts("b", "", func(p *pb.PutRequest) { p.IgnoreValue, p.Lease = true, missing }), kvstore.ErrLeaseNotFound),
		fail(withOpts("b", "", func(p *pb.PutRequest) { p.IgnoreValue, p.Lease = true, lease }), kvstore.ErrKeyNotFound),
		ok(put("d", ""), putResp(9, nil)),
		ok(get("d"), found(9, kv("d", "", 9, 9, 1))),
		fail(put("", "v"), kvstore.ErrEmptyKey),
		ok(at(get("a"), 3), found(9, kv("a", "2", 2, 3, 2))),
		ok(put("\x00", "\xff"), putResp(10, nil)),
		ok(all(), found(10, kv("\x00", "\xff", 10, 10, 1), withLease(kv("a", "5", 2, 8, 7), lease), kv("d", "", 9, 9, 1))),
	}}
}

func deleteRanges() Scenario {
	withPrev := func(d *pb.DeleteRangeRequest) *pb.DeleteRangeRequest { d.PrevKv = true; return d }
	return Scenario{Name: "DeleteRange", Steps: []Step{
		ok(put("a", "1"), putResp(2, nil)),
		ok(put("ab", "2"), putResp(3, nil)),
		ok(put("b", "3"), putResp(4, nil)),
		ok(put("c", "4"), putResp(5, nil)),
		ok(put("d", "5"), putResp(6, nil)),
		ok(del("z"), delResp(6, 0)),
		ok(withPrev(del("a")), delResp(7, 1, kv("a", "1", 2, 2, 1))),
		ok(del("a"), delResp(7, 0)),
		ok(withPrev(delSpan("ab", "c")), delResp(8, 2, kv("ab", "2", 3, 3, 1), kv("b", "3", 4, 4, 1))),
		ok(at(all(), 8), found(8, kv("c", "4", 5, 5, 1), kv("d", "5", 6, 6, 1))),
		ok(delSpan("c", "\x00"), delResp(9, 2)),
		ok(all(), rangeResp(9, 0, false)),
		ok(put("a", "again"), putResp(10, nil)),
		ok(get("a"), found(10, kv("a", "again", 10, 10, 1))),
		ok(at(get("a"), 6), found(10, kv("a", "1", 2, 2, 1))),
		ok(at(get("a"), 7), rangeResp(10, 0, false)),
		ok(delSpan("c", "a"), delResp(10, 0)),
		fail(del(""), kvstore.ErrEmptyKey),
		ok(withPrev(delSpan("a", "\x00")), delResp(11, 1, kv("a", "again", 10, 10, 1))),
		ok(withPrev(delSpan("x", "y")), delResp(11, 0)),
		ok(at(all(), 8), found(11, kv("c", "4", 5, 5, 1), kv("d", "5", 6, 6, 1))),
	}}
}
