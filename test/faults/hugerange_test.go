package faults

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/test/framework"
)

// hugeRangeSizes are the sizes of one TestOverloadHugeRange run. At the
// short scale MetaStore's send limit is lowered so the range that is too
// large is tens of MiB; etcd, which has no such flag, answers that range
// (its limit is gRPC's 2 GiB) and gives the size MetaStore must report.
// At the long scale both run with etcd's limit and the range is over
// 2 GiB: both refuse it, etcd after building it.
type hugeRangeSizes struct {
	values    int   // number of keys
	valueSize int   // bytes per value
	sendLimit int64 // MetaStore's --experimental-max-send-bytes; 0: the default
	// requestBytes is --max-request-bytes on both servers, so that the
	// values fit in one put each.
	requestBytes int
}

func hugeRangeSizesFor(t *testing.T) hugeRangeSizes {
	t.Helper()
	switch *overloadScale {
	case "short":
		return hugeRangeSizes{values: 40, valueSize: 1 << 20, sendLimit: 32 << 20, requestBytes: maxRequestBytes}
	case "long":
		// 2.1 GiB in 8 MiB values.
		return hugeRangeSizes{values: 270, valueSize: 8 << 20, requestBytes: 9 << 20}
	}
	t.Fatalf("-overload.scale=%q: want short or long", *overloadScale)
	return hugeRangeSizes{}
}

// sendTooLarge is gRPC's refusal of an oversized message, which etcd's
// clients get for a range over its send limit.
var sendTooLarge = regexp.MustCompile(`^grpc: trying to send message larger than max \((\d+) vs\. (\d+)\)$`)

// TestOverloadHugeRange fills a member with more than its send limit
// and reads it all in one range. MetaStore refuses the range with gRPC's
// ResourceExhausted "trying to send message larger than max (N vs. M)",
// N the response's size, without building it; a keys-only and a
// count-only range over the same keys, and the same range in pages, are
// answered; the member stays up and keeps answering. Against etcd at the
// short scale the range is within etcd's limit and is answered: its size
// is the N MetaStore must report.
func TestOverloadHugeRange(t *testing.T) {
	sizes := hugeRangeSizesFor(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	// The quota (2 GiB by default) must hold the long scale's 2.1 GiB.
	flags := []string{"--max-request-bytes=" + strconv.Itoa(sizes.requestBytes), "--quota-backend-bytes=8589934592"}
	if target == framework.TargetMetaStore && sizes.sendLimit > 0 {
		flags = append(flags, fmt.Sprintf("--experimental-max-send-bytes=%d", sizes.sendLimit))
	}
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 1, ExtraFlags: flags})
	m := c.Member(0)
	fillHugeRange(ctx, t, m, sizes)

	before, err := rssBytes(m.PID())
	if err != nil {
		t.Fatal(err)
	}
	rss := watchRSS(m)
	kv := pb.NewKVClient(dialHuge(t, m))
	all := &pb.RangeRequest{Key: []byte("/huge/"), RangeEnd: []byte("/huge0")}
	// The size of the whole response, from the pages (each under the limit).
	pageBytes, pageKeys := rangeInPages(ctx, t, kv, all, 8)
	if pageKeys != sizes.values {
		t.Fatalf("the pages hold %d keys, want %d", pageKeys, sizes.values)
	}
	start := time.Now()
	resp, err := kv.Range(ctx, all)
	took := time.Since(start)
	switch limit := sizes.sendLimit; {
	case target == framework.TargetEtcd && limit > 0:
		// etcd's limit is 2 GiB: it answers, and gives the size.
		if err != nil {
			t.Fatalf("etcd: range of %d bytes: %v", pageBytes, err)
		}
		if got := (&pb.RangeResponse{Kvs: resp.Kvs}).Size(); int64(got) != pageBytes {
			t.Fatalf("etcd's response carries %d bytes of key-values, the pages %d", got, pageBytes)
		}
		t.Logf("etcd answered the %d-byte range in %v (its limit is 2 GiB; MetaStore's is lowered to %d here)", resp.Size(), took, limit)
	default:
		if limit == 0 {
			limit = 1<<31 - 1
		}
		n := requireSendTooLarge(t, err, limit)
		// N counts the key-values exactly and the rest of the response
		// (header, count, more) at its largest, 64 bytes on MetaStore.
		if n < pageBytes || n > pageBytes+64 {
			t.Errorf("refused as %d bytes; the key-values alone are %d", n, pageBytes)
		}
		t.Logf("%s refused the %d-byte range in %v", m.Name(), n, took)
	}

	keys, err := kv.Range(ctx, &pb.RangeRequest{Key: all.Key, RangeEnd: all.RangeEnd, KeysOnly: true})
	if err != nil {
		t.Fatalf("keys-only range: %v", err)
	}
	if len(keys.Kvs) != sizes.values || keys.Count != int64(sizes.values) {
		t.Fatalf("keys-only range: %d keys, count %d, want %d", len(keys.Kvs), keys.Count, sizes.values)
	}
	for _, kv := range keys.Kvs {
		if len(kv.Value) != 0 || kv.Version != 1 || kv.CreateRevision != kv.ModRevision {
			t.Fatalf("keys-only range: %+v", kv)
		}
	}
	count, err := kv.Range(ctx, &pb.RangeRequest{Key: all.Key, RangeEnd: all.RangeEnd, CountOnly: true})
	if err != nil || count.Count != int64(sizes.values) {
		t.Fatalf("count-only range: %v, %v", count, err)
	}
	if _, err := m.NewClient(t).Put(ctx, "/huge-after", "x"); err != nil {
		t.Fatalf("a put after the huge range: %v", err)
	}
	peak := rss.stopPeak(t, m)
	grew := peak - before
	t.Logf("%s: %d keys of %d bytes (%d bytes of key-values); RSS %d MiB before the reads, peak %d MiB during them (+%d MiB)",
		m.Name(), sizes.values, sizes.valueSize, pageBytes, before>>20, peak>>20, grew>>20)
	// Refusing the range must not cost its size in memory. etcd builds
	// the response before it fails to send it: at the long scale it grows
	// by gigabytes, a figure to compare, not a bound it can pass.
	// The pages read are garbage the collector lets reach half the live
	// heap before it runs (gcheadroom), so a member holding gigabytes
	// grows by that much whatever it does; building the refused response
	// and its encoding would add twice its size on top.
	bound := max(hugeRangeGrowthBound, before/2)
	if grew > bound && (target == framework.TargetMetaStore || sizes.sendLimit > 0) {
		t.Errorf("%s grew by %d MiB during the reads, over the %d MiB bound", m.Name(), grew>>20, bound>>20)
	}
}

// hugeRangeGrowthBound is how much a small member's RSS may grow while it
// reads pages of 8 values and refuses (or, etcd at the short scale,
// answers) the range: a few pages, or a response of tens of MiB and its
// encoding.
const hugeRangeGrowthBound = 512 << 20

// TestOverloadRangeMemoryBound runs MetaStore with a GOMEMLIMIT: a range
// whose response would take more than a quarter of it is refused with
// ResourceExhausted before the member builds it, while the same keys in
// pages are answered. etcd, which has no such bound, answers the range.
func TestOverloadRangeMemoryBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	const memLimit = 192 << 20 // a quarter is 48 MiB
	sizes := hugeRangeSizes{values: 56, valueSize: 1 << 20, requestBytes: maxRequestBytes}
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 1, Env: []string{fmt.Sprintf("GOMEMLIMIT=%d", memLimit)}})
	m := c.Member(0)
	fillHugeRange(ctx, t, m, sizes)

	kv := pb.NewKVClient(dialHuge(t, m))
	all := &pb.RangeRequest{Key: []byte("/huge/"), RangeEnd: []byte("/huge0")}
	_, err = kv.Range(ctx, all)
	if target == framework.TargetEtcd {
		if err != nil {
			t.Fatalf("etcd: %v", err)
		}
	} else {
		st := status.Convert(err)
		if err == nil || st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "memory bound of 50331648 bytes") {
			t.Fatalf("range over a quarter of GOMEMLIMIT: got %v, want ResourceExhausted naming the memory bound", err)
		}
		t.Logf("refused: %s", st.Message())
	}
	if _, n := rangeInPages(ctx, t, kv, all, 8); n != sizes.values {
		t.Fatalf("the pages hold %d keys, want %d", n, sizes.values)
	}
}

// fillHugeRange puts sizes.values keys /huge/NNNN of sizes.valueSize
// bytes, from four clients.
func fillHugeRange(ctx context.Context, t *testing.T, m *framework.Member, sizes hugeRangeSizes) {
	t.Helper()
	value := strings.Repeat("h", sizes.valueSize)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		kv := pb.NewKVClient(dialHuge(t, m))
		wg.Go(func() {
			for i := w; i < sizes.values; i += 4 {
				req := &pb.PutRequest{Key: fmt.Appendf(nil, "/huge/%04d", i), Value: []byte(value)}
				_, err := kv.Put(ctx, req)
				for tooManyRequests(err) {
					// A member whose snapshots lag the writes sheds them
					// with etcd's "too many requests": try again later.
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond): // a retry's backoff, not a synchronisation
					}
					_, err = kv.Put(ctx, req)
				}
				if err != nil {
					errs <- fmt.Errorf("put %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// dialHuge opens a raw gRPC connection that accepts any response size and
// sends values up to 16 MiB.
func dialHuge(t *testing.T, m *framework.Member) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(m.Endpoint(), grpc.WithTransportCredentials(m.GRPCCredentials(t)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31-1), grpc.MaxCallSendMsgSize(16<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// rangeInPages reads req in pages of pageSize keys and returns the
// encoded size the key-values would have in one response, and how many
// there are.
func rangeInPages(ctx context.Context, t *testing.T, kv pb.KVClient, req *pb.RangeRequest, pageSize int64) (int64, int) {
	t.Helper()
	var size int64
	keys := 0
	key := req.Key
	for {
		resp, err := kv.Range(ctx, &pb.RangeRequest{Key: key, RangeEnd: req.RangeEnd, Limit: pageSize})
		if err != nil {
			t.Fatalf("page from %q: %v", key, err)
		}
		size += int64((&pb.RangeResponse{Kvs: resp.Kvs}).Size())
		keys += len(resp.Kvs)
		if !resp.More {
			return size, keys
		}
		key = append(append([]byte(nil), resp.Kvs[len(resp.Kvs)-1].Key...), 0)
	}
}

// requireSendTooLarge checks gRPC's refusal of a response over limit and
// returns the size it names.
func requireSendTooLarge(t *testing.T, err error, limit int64) int64 {
	t.Helper()
	st := status.Convert(err)
	match := sendTooLarge.FindStringSubmatch(st.Message())
	if err == nil || st.Code() != codes.ResourceExhausted || match == nil {
		t.Fatalf("got %v, want ResourceExhausted %q", err, sendTooLarge)
	}
	n, _ := strconv.ParseInt(match[1], 10, 64)
	if m, _ := strconv.ParseInt(match[2], 10, 64); m != limit {
		t.Errorf("refused against a limit of %d, want %d", m, limit)
	}
	return n
}

// tooManyRequests reports etcd's "too many requests" refusal.
func tooManyRequests(err error) bool {
	st := status.Convert(err)
	return err != nil && st.Code() == codes.ResourceExhausted && st.Message() == "etcdserver: too many requests"
}
