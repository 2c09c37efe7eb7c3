package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/rangestream"
	"github.com/metastore-io/metastore/test/framework"
)

// rangeStreamAbsent checks, against a real etcd 3.6, that RangeStream
// (etcd 3.7's) is answered codes.Unimplemented, and skips the rest of
// the test; against MetaStore it returns.
func rangeStreamAbsent(ctx context.Context, t *testing.T, c *framework.Cluster, cli *clientv3.Client) {
	t.Helper()
	if c.Target() != framework.TargetEtcd {
		return
	}
	_, err := rangestream.Get(ctx, cli.ActiveConnection(), &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("b")})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("RangeStream on etcd 3.6: got %v, want codes.Unimplemented", err)
	}
	t.Skip("etcd 3.6 has no RangeStream (etcd 3.7's): checked that it answers codes.Unimplemented; the comparison with Range needs the RPC")
}

// sameRange fails unless got and want encode alike.
func sameRange(t *testing.T, what string, got, want *pb.RangeResponse) {
	t.Helper()
	g, err := got.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w, err := want.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Fatalf("%s: merged RangeStream differs from Range:\n got %d kvs count %d more %v header %v\nwant %d kvs count %d more %v header %v",
			what, len(got.Kvs), got.Count, got.More, got.Header, len(want.Kvs), want.Count, want.More, want.Header)
	}
}

// TestRangeStreamMatchesRange: for many request shapes over small keys
// and keys with large values (several chunks' worth), the merge of
// RangeStream's chunks is the unary Range's response, header included;
// a sort order is Unimplemented and a bad request gets Range's error.
func TestRangeStreamMatchesRange(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	rangeStreamAbsent(ctx, t, s.cluster, s.cli)

	// 24 values of 256 KiB: 6 MiB, four chunks or more at the default
	// 1.5 MiB --max-request-bytes.
	big := strings.Repeat("v", 256<<10)
	for i := range 24 {
		mustPut(ctx, t, s.cli, fmt.Sprintf("/rs/big/%02d", i), big+fmt.Sprint(i))
	}
	for i := range 100 {
		mustPut(ctx, t, s.cli, fmt.Sprintf("/rs/small/%03d", i), fmt.Sprint(i))
	}
	mid := currentRevision(ctx, t, s.cli)
	for i := 0; i < 100; i += 4 {
		mustPut(ctx, t, s.cli, fmt.Sprintf("/rs/small/%03d", i), "updated")
	}
	for i := 1; i < 100; i += 9 {
		if _, err := s.cli.Delete(ctx, fmt.Sprintf("/rs/small/%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	span := func(key, end string) pb.RangeRequest { return pb.RangeRequest{Key: []byte(key), RangeEnd: []byte(end)} }
	with := func(r pb.RangeRequest, f func(*pb.RangeRequest)) *pb.RangeRequest {
		if f != nil {
			f(&r)
		}
		return &r
	}
	all := span("/rs/", "/rs0")
	small := span("/rs/small/", "/rs/small0")
	cases := map[string]*pb.RangeRequest{
		"Prefix":          &all,
		"Small":           &small,
		"FromKey":         with(span("/rs/small/050", "\x00"), nil),
		"Everything":      with(span("\x00", "\x00"), nil),
		"SingleKey":       {Key: []byte("/rs/big/03")},
		"SingleMissing":   {Key: []byte("/rs/small/001")},
		"Empty":           with(span("/none/", "/none0"), nil),
		"Limit":           with(all, func(r *pb.RangeRequest) { r.Limit = 10 }),
		"LimitOne":        with(all, func(r *pb.RangeRequest) { r.Limit = 1 }),
		"LimitBeyond":     with(all, func(r *pb.RangeRequest) { r.Limit = 1000 }),
		"KeysOnly":        with(all, func(r *pb.RangeRequest) { r.KeysOnly = true }),
		"CountOnly":       with(all, func(r *pb.RangeRequest) { r.CountOnly = true }),
		"Revision":        with(all, func(r *pb.RangeRequest) { r.Revision = mid }),
		"RevisionLimit":   with(small, func(r *pb.RangeRequest) { r.Revision = mid; r.Limit = 30 }),
		"MinMod":          with(all, func(r *pb.RangeRequest) { r.MinModRevision = mid }),
		"MaxModLimit":     with(all, func(r *pb.RangeRequest) { r.MaxModRevision = mid; r.Limit = 40 }),
		"MinCreateLimit":  with(small, func(r *pb.RangeRequest) { r.MinCreateRevision = 50; r.Limit = 5 }),
		"MaxCreate":       with(all, func(r *pb.RangeRequest) { r.MaxCreateRevision = 20 }),
		"FilterKeysOnly":  with(all, func(r *pb.RangeRequest) { r.MinModRevision = mid; r.KeysOnly = true; r.Limit = 7 }),
		"Serializable":    with(all, func(r *pb.RangeRequest) { r.Serializable = true }),
		"SortAscendByKey": with(all, func(r *pb.RangeRequest) { r.SortOrder = pb.RangeRequest_ASCEND }),
	}
	conn := s.cli.ActiveConnection()
	for name, req := range cases {
		// The unary response is one message of up to 6 MiB, over gRPC's
		// default 4 MiB receive limit; no chunk of the stream is.
		want, err := s.kv.Range(ctx, req, grpc.MaxCallRecvMsgSize(math.MaxInt32))
		if err != nil {
			t.Fatalf("%s: Range: %v", name, err)
		}
		got, err := rangestream.Get(ctx, conn, req)
		if err != nil {
			t.Fatalf("%s: RangeStream: %v", name, err)
		}
		sameRange(t, name, got, want)
	}

	// Several chunks, intermediate ones with key-values only.
	st, err := rangestream.Open(ctx, conn, &all)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []*pb.RangeResponse
	err = st.ForEach(func(c *pb.RangeResponse) error {
		chunks = append(chunks, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 4 {
		t.Fatalf("%d chunks for 6 MiB at 1.5 MiB a chunk", len(chunks))
	}
	for i, c := range chunks[:len(chunks)-1] {
		if c.Header != nil || c.Count != 0 || c.More {
			t.Fatalf("chunk %d of %d carries header %v count %d more %v", i, len(chunks), c.Header, c.Count, c.More)
		}
	}
	if last := chunks[len(chunks)-1]; last.Header == nil || last.Header.ClusterId == 0 || last.Header.MemberId == 0 || last.Header.RaftTerm == 0 {
		t.Fatalf("last chunk's header %v, want cluster, member, term and revision", last.Header)
	}

	for _, req := range []*pb.RangeRequest{
		with(all, func(r *pb.RangeRequest) { r.SortOrder = pb.RangeRequest_DESCEND }),
		with(all, func(r *pb.RangeRequest) { r.SortTarget = pb.RangeRequest_MOD }),
	} {
		if _, err := rangestream.Get(ctx, conn, req); status.Code(err) != codes.Unimplemented {
			t.Fatalf("sort %v by %v: got %v, want codes.Unimplemented", req.SortOrder, req.SortTarget, err)
		}
	}
	_, err = rangestream.Get(ctx, conn, &pb.RangeRequest{})
	requireRPCError(t, err, rpctypes.ErrGRPCEmptyKey)
	_, err = rangestream.Get(ctx, conn, with(all, func(r *pb.RangeRequest) { r.Revision = mid + 1000 }))
	requireRPCError(t, err, rpctypes.ErrGRPCFutureRev)
}

// TestRangeStreamCompactedMidStream: a stream whose pinned revision is
// compacted before its last chunk is read ends with etcd's ErrCompacted.
// The client's flow-control windows are etcd's minimum, and chunks are
// small (--max-request-bytes 64 KiB), so the member cannot read ahead
// more than a few of the fifty chunks before the compaction.
func TestRangeStreamCompactedMidStream(t *testing.T) {
	t.Parallel()
	c := framework.NewCluster(t, framework.ClusterConfig{ExtraFlags: []string{"--max-request-bytes=65536"}})
	cli := c.NewClient(t)
	ctx := testContext(t, testTimeout)
	rangeStreamAbsent(ctx, t, c, cli)

	value := strings.Repeat("v", 16<<10)
	for i := range 200 {
		mustPut(ctx, t, cli, fmt.Sprintf("/rs/%03d", i), value)
	}
	tlsCfg, err := c.TLS().ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	slow, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints(), TLS: tlsCfg, DialTimeout: framework.DefaultDialTimeout, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithInitialWindowSize(64 << 10), grpc.WithInitialConnWindowSize(64 << 10)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	st, err := rangestream.Open(ctx, slow.ActiveConnection(), &pb.RangeRequest{Key: []byte("/rs/"), RangeEnd: []byte("/rs0")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	rev := mustPut(ctx, t, cli, "/other", "x").Header.Revision
	if _, err := cli.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	for n := 1; ; n++ {
		_, err := st.Recv()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			t.Fatalf("stream ended after %d chunks without an error", n)
		}
		requireRPCError(t, err, rpctypes.ErrGRPCCompacted)
		t.Logf("ErrCompacted after %d chunks", n)
		return
	}
}

// TestRangeStreamPermission: RangeStream makes Range's permission check:
// a user reads the range it may read, in chunks equal to Range's answer,
// and gets Range's refusal elsewhere; so does a caller without a user.
func TestRangeStreamPermission(t *testing.T) {
	t.Parallel()
	c := framework.NewCluster(t, anonymousCapable(framework.ClusterConfig{}))
	cli := c.NewClient(t)
	ctx := testContext(t, testTimeout)
	rangeStreamAbsent(ctx, t, c, cli)

	for i := range 50 {
		mustPut(ctx, t, cli, fmt.Sprintf("/mine/%02d", i), strings.Repeat("m", 1000))
	}
	mustPut(ctx, t, cli, "/theirs/a", "t")
	enableAuthWithRoot(ctx, t, c, cli)
	root := clientAs(t, c, c.Endpoints(), "root", authRootPassword)
	addUserWithRole(ctx, t, root, "reader", perm(authpb.READ, "/mine/", "/mine0"))
	reader := clientAs(t, c, c.Endpoints(), "reader", authUserPassword)

	mine := &pb.RangeRequest{Key: []byte("/mine/"), RangeEnd: []byte("/mine0")}
	want, err := pb.NewKVClient(reader.ActiveConnection()).Range(ctx, mine)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rangestream.Get(ctx, reader.ActiveConnection(), mine)
	if err != nil {
		t.Fatal(err)
	}
	sameRange(t, "own range", got, want)
	_, err = rangestream.Get(ctx, reader.ActiveConnection(), &pb.RangeRequest{Key: []byte("/theirs/"), RangeEnd: []byte("/theirs0")})
	requireRPCError(t, err, rpctypes.ErrGRPCPermissionDenied)
	// A caller without a user gets what Range gives it.
	_, rangeErr := pb.NewKVClient(cli.ActiveConnection()).Range(ctx, mine)
	if rangeErr == nil {
		t.Fatal("Range without a user succeeded under authentication")
	}
	_, err = rangestream.Get(ctx, cli.ActiveConnection(), mine)
	requireRPCError(t, err, rangeErr)
}
