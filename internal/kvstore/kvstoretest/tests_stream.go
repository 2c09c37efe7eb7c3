package kvstoretest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/metastore-io/metastore/internal/kvstore"
)

// streamChunks runs a streamed range and returns its chunks.
func streamChunks(s *kvstore.Store, req *pb.RangeRequest, chunkBytes int) ([]*pb.RangeResponse, error) {
	var chunks []*pb.RangeResponse
	err := s.RangeStream(context.Background(), req, chunkBytes, func(r *pb.RangeResponse) error {
		chunks = append(chunks, r)
		return nil
	})
	return chunks, err
}

// mergeChunks merges chunks as a client does (pkg/rangestream's Merge is
// proto.Merge for RangeResponse; this kit sits below it and uses
// proto.Merge itself).
func mergeChunks(chunks []*pb.RangeResponse) *pb.RangeResponse {
	merged := &pb.RangeResponse{}
	for _, c := range chunks {
		proto.Merge(protoadapt.MessageV2Of(merged), protoadapt.MessageV2Of(c))
	}
	return merged
}

// checkStreamLayout checks that only the last chunk carries a header,
// Count and More, and that no chunk's key-values are much over target.
func checkStreamLayout(t *testing.T, chunks []*pb.RangeResponse, target int, maxKV int) {
	t.Helper()
	if len(chunks) == 0 {
		t.Fatal("no chunks")
	}
	for i, c := range chunks {
		last := i == len(chunks)-1
		if !last && (c.Header != nil || c.Count != 0 || c.More || len(c.Kvs) == 0) {
			t.Fatalf("chunk %d of %d: header %v count %d more %v, %d kvs; want key-values only", i, len(chunks), c.Header, c.Count, c.More, len(c.Kvs))
		}
		if last && c.Header == nil {
			t.Fatalf("last chunk has no header")
		}
		if n := (&pb.RangeResponse{Kvs: c.Kvs}).Size(); n > target+maxKV+16 {
			t.Fatalf("chunk %d: %d bytes of key-values, over the target %d plus one key-value", i, n, target)
		}
	}
}

// testRangeStream: the merge of a streamed range's chunks is the unary
// range's response, for every supported option, with chunks of key
// values only but the last; a compaction of the pinned revision ends the
// stream with ErrCompacted; a sort order is refused.
func testRangeStream(t *testing.T, newBackend func(t *testing.T) kvstore.Backend) {
	s := open(t, newBackend(t), kvstore.Options{})
	const keys = 120
	for i := range keys {
		v := strings.Repeat(fmt.Sprint(i%10), 10+i*7%300)
		if _, err := Exec(s, put(fmt.Sprintf("k%03d", i), v)); err != nil {
			t.Fatal(err)
		}
	}
	mid := s.Rev()
	// Later history: updates, deletions, new keys, keys elsewhere.
	for i := 0; i < keys; i += 3 {
		if _, err := Exec(s, put(fmt.Sprintf("k%03d", i), "updated")); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < keys; i += 7 {
		if _, err := Exec(s, del(fmt.Sprintf("k%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "k0505", "z"} {
		if _, err := Exec(s, put(k, "x")); err != nil {
			t.Fatal(err)
		}
	}
	reqs := map[string]*pb.RangeRequest{
		"Prefix":           span("k", "l"),
		"All":              all(),
		"FromKey":          span("k050", "\x00"),
		"SingleKey":        get("k004"),
		"SingleMissing":    get("k001"),
		"Empty":            span("m", "n"),
		"Limit":            {Key: []byte("k"), RangeEnd: []byte("l"), Limit: 50},
		"LimitOne":         {Key: []byte("k"), RangeEnd: []byte("l"), Limit: 1},
		"LimitAll":         {Key: []byte("k"), RangeEnd: []byte("l"), Limit: keys * 2},
		"LimitExact":       {Key: []byte("k"), RangeEnd: []byte("k010"), Limit: 8}, // 8 live keys
		"LimitAllButOne":   {Key: []byte("k"), RangeEnd: []byte("k010"), Limit: 7},
		"KeysOnly":         {Key: []byte("k"), RangeEnd: []byte("l"), KeysOnly: true},
		"CountOnly":        {Key: []byte("k"), RangeEnd: []byte("l"), CountOnly: true},
		"CountOnlyLimit":   {Key: []byte("k"), RangeEnd: []byte("l"), CountOnly: true, Limit: 3},
		"Revision":         {Key: []byte("k"), RangeEnd: []byte("l"), Revision: mid},
		"RevisionLimit":    {Key: []byte("k"), RangeEnd: []byte("l"), Revision: mid, Limit: 70},
		"MinMod":           {Key: []byte("k"), RangeEnd: []byte("l"), MinModRevision: mid},
		"MaxMod":           {Key: []byte("k"), RangeEnd: []byte("l"), MaxModRevision: mid},
		"MinCreate":        {Key: []byte("k"), RangeEnd: []byte("l"), MinCreateRevision: 60},
		"MaxCreateLimit":   {Key: []byte("k"), RangeEnd: []byte("l"), MaxCreateRevision: 60, Limit: 20},
		"FilterLimitMore":  {Key: []byte("k"), RangeEnd: []byte("l"), MinModRevision: mid, Limit: 5},
		"FilterLimitExact": {Key: []byte("k"), RangeEnd: []byte("l"), MinModRevision: mid + 1, Limit: int64(keys / 3)},
		"FilterLimitLast":  {Key: []byte("k"), RangeEnd: []byte("l"), MinCreateRevision: s.Rev() - 1, Limit: 1},
		"FilterKeysOnly":   {Key: []byte("k"), RangeEnd: []byte("l"), MaxModRevision: mid, KeysOnly: true, Limit: 30},
		"FilterNone":       {Key: []byte("k"), RangeEnd: []byte("l"), MinModRevision: s.Rev() + 100},
		"SortAscendKey":    {Key: []byte("k"), RangeEnd: []byte("l"), SortOrder: pb.RangeRequest_ASCEND},
	}
	const maxKV = 400 // the largest key-value written, encoded, and then some
	for name, req := range reqs {
		for _, target := range []int{1, 700, 4096, 0} {
			t.Run(fmt.Sprintf("%s/%d", name, target), func(t *testing.T) {
				if err := kvstore.CheckRange(req); err != nil {
					t.Fatal(err)
				}
				want, err := s.Range(req)
				if err != nil {
					t.Fatal(err)
				}
				chunks, err := streamChunks(s, req, target)
				if err != nil {
					t.Fatal(err)
				}
				if target > 0 {
					checkStreamLayout(t, chunks, target, maxKV)
				}
				if req.CountOnly && len(chunks) != 1 {
					t.Fatalf("count_only: %d chunks, want 1", len(chunks))
				}
				if same, diff := SameResponse(mergeChunks(chunks), want); !same {
					t.Fatalf("merged stream differs from Range (%d chunks):%s", len(chunks), diff)
				}
			})
		}
	}
	t.Run("ManyChunks", func(t *testing.T) {
		chunks, err := streamChunks(s, span("k", "l"), 700)
		if err != nil {
			t.Fatal(err)
		}
		if len(chunks) < 10 {
			t.Fatalf("%d chunks for %d keys at 700 bytes a chunk", len(chunks), keys)
		}
	})
	t.Run("SortRefused", func(t *testing.T) {
		for _, req := range []*pb.RangeRequest{
			{Key: []byte("k"), RangeEnd: []byte("l"), SortOrder: pb.RangeRequest_DESCEND},
			{Key: []byte("k"), RangeEnd: []byte("l"), SortTarget: pb.RangeRequest_MOD},
			{Key: []byte("k"), RangeEnd: []byte("l"), SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_VALUE},
		} {
			if _, err := streamChunks(s, req, 0); !errors.Is(err, kvstore.ErrStreamSortOrder) {
				t.Fatalf("%v: got %v, want ErrStreamSortOrder", req, err)
			}
		}
	})
	t.Run("FutureRevision", func(t *testing.T) {
		if _, err := streamChunks(s, at(span("k", "l"), s.Rev()+1), 0); !errors.Is(err, kvstore.ErrFutureRev) {
			t.Fatalf("got %v, want ErrFutureRev", err)
		}
	})
	t.Run("PinnedRevisionAcrossWrites", func(t *testing.T) {
		want, err := s.Range(span("k", "l"))
		if err != nil {
			t.Fatal(err)
		}
		var chunks []*pb.RangeResponse
		err = s.RangeStream(context.Background(), span("k", "l"), 700, func(r *pb.RangeResponse) error {
			chunks = append(chunks, r)
			if len(chunks) == 1 { // writes between chunks are not seen
				if _, err := Exec(s, put("k119", "later")); err != nil {
					return err
				}
				if _, err := Exec(s, del("k118")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if same, diff := SameResponse(mergeChunks(chunks), want); !same {
			t.Fatalf("merged stream is not the range at the pinned revision:%s", diff)
		}
	})
	t.Run("CompactedMidStream", func(t *testing.T) {
		sent := 0
		err := s.RangeStream(context.Background(), span("k", "l"), 700, func(r *pb.RangeResponse) error {
			sent++
			if sent == 1 {
				if _, err := Exec(s, put("other", "x")); err != nil {
					return err
				}
				if _, err := Exec(s, compact(s.Rev())); err != nil {
					return err
				}
			}
			return nil
		})
		if !errors.Is(err, kvstore.ErrCompacted) || sent != 1 {
			t.Fatalf("got %v after %d chunks, want ErrCompacted after 1", err, sent)
		}
	})
	t.Run("SendErrorEnds", func(t *testing.T) {
		stop := errors.New("client gone")
		err := s.RangeStream(context.Background(), span("k", "l"), 700, func(*pb.RangeResponse) error { return stop })
		if !errors.Is(err, stop) {
			t.Fatalf("got %v, want the send error", err)
		}
	})
}
