package faults

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/test/framework"
)

var fuzzDuration = flag.Duration("reqfuzz.duration", 10*time.Second, "how long TestRequestFuzzer sends requests")

// rawCodec sends and receives messages as they are: the fuzzer's
// malformed requests are bytes no wireMessage would marshal to.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" } // the content-subtype the server expects

// wireMessage is what etcd's generated (gogoproto) messages offer.
type wireMessage interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// fuzzMethod is a unary RPC the fuzzer calls, with a generator of
// well-formed random requests and the response type to decode.
type fuzzMethod struct {
	name string
	req  func(g *reqGen) wireMessage
	resp func() wireMessage
}

// fuzzMethods are the unary KV, Lease, Cluster and Maintenance RPCs that
// cannot take the member out of service: no member add or remove (a
// phantom member would cost the single member its quorum), no auth
// changes, no alarm activation.
var fuzzMethods = []fuzzMethod{
	{"/etcdserverpb.KV/Range", func(g *reqGen) wireMessage { return g.rangeReq() }, func() wireMessage { return &pb.RangeResponse{} }},
	{"/etcdserverpb.KV/Put", func(g *reqGen) wireMessage { return g.putReq() }, func() wireMessage { return &pb.PutResponse{} }},
	{"/etcdserverpb.KV/DeleteRange", func(g *reqGen) wireMessage { return g.deleteReq() }, func() wireMessage { return &pb.DeleteRangeResponse{} }},
	{"/etcdserverpb.KV/Txn", func(g *reqGen) wireMessage { return g.txnReq(2) }, func() wireMessage { return &pb.TxnResponse{} }},
	{"/etcdserverpb.KV/Compact", func(g *reqGen) wireMessage {
		return &pb.CompactionRequest{Revision: g.rev(), Physical: g.rng.IntN(2) == 0}
	}, func() wireMessage { return &pb.CompactionResponse{} }},
	{"/etcdserverpb.Lease/LeaseGrant", func(g *reqGen) wireMessage {
		return &pb.LeaseGrantRequest{TTL: g.rng.Int64N(120) - 10, ID: g.leaseID()}
	}, func() wireMessage { return &pb.LeaseGrantResponse{} }},
	{"/etcdserverpb.Lease/LeaseRevoke", func(g *reqGen) wireMessage { return &pb.LeaseRevokeRequest{ID: g.leaseID()} },
		func() wireMessage { return &pb.LeaseRevokeResponse{} }},
	{"/etcdserverpb.Lease/LeaseTimeToLive", func(g *reqGen) wireMessage {
		return &pb.LeaseTimeToLiveRequest{ID: g.leaseID(), Keys: g.rng.IntN(2) == 0}
	}, func() wireMessage { return &pb.LeaseTimeToLiveResponse{} }},
	{"/etcdserverpb.Lease/LeaseLeases", func(*reqGen) wireMessage { return &pb.LeaseLeasesRequest{} },
		func() wireMessage { return &pb.LeaseLeasesResponse{} }},
	{"/etcdserverpb.Cluster/MemberList", func(g *reqGen) wireMessage { return &pb.MemberListRequest{Linearizable: g.rng.IntN(2) == 0} },
		func() wireMessage { return &pb.MemberListResponse{} }},
	{"/etcdserverpb.Maintenance/Status", func(*reqGen) wireMessage { return &pb.StatusRequest{} },
		func() wireMessage { return &pb.StatusResponse{} }},
	{"/etcdserverpb.Maintenance/HashKV", func(g *reqGen) wireMessage { return &pb.HashKVRequest{Revision: g.rev()} },
		func() wireMessage { return &pb.HashKVResponse{} }},
	{"/etcdserverpb.Maintenance/Alarm", func(*reqGen) wireMessage { return &pb.AlarmRequest{Action: pb.AlarmRequest_GET} },
		func() wireMessage { return &pb.AlarmResponse{} }},
}

// reqGen draws random requests over a small key space, so that requests
// collide: ranges meet puts, deletes meet leases, compactions meet reads.
type reqGen struct {
	rng     *rand.Rand
	lastRev int64
}

func (g *reqGen) key() []byte {
	switch g.rng.IntN(8) {
	case 0:
		return nil
	case 1:
		return []byte{0}
	default:
		return fmt.Appendf(nil, "/fz/%d", g.rng.IntN(16))
	}
}

func (g *reqGen) rangeEnd() []byte {
	switch g.rng.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{0} // every key from key on
	default:
		return g.key()
	}
}

// rev is a revision near the store's (past, current, future) or a
// nonsense one.
func (g *reqGen) rev() int64 {
	switch g.rng.IntN(5) {
	case 0:
		return -g.rng.Int64N(5)
	case 1:
		return g.lastRev + 1 + g.rng.Int64N(3)
	default:
		return g.rng.Int64N(g.lastRev + 1)
	}
}

func (g *reqGen) leaseID() int64 {
	if g.rng.IntN(4) == 0 {
		return g.rng.Int64()
	}
	return int64(g.rng.IntN(4)) // 0 (none, or "pick one") and a few fixed IDs
}

func (g *reqGen) rangeReq() *pb.RangeRequest {
	return &pb.RangeRequest{Key: g.key(), RangeEnd: g.rangeEnd(), Limit: g.rng.Int64N(5) - 1, Revision: g.rev(),
		SortOrder: pb.RangeRequest_SortOrder(g.rng.IntN(4) - 1), SortTarget: pb.RangeRequest_SortTarget(g.rng.IntN(6) - 1),
		Serializable: g.rng.IntN(2) == 0, KeysOnly: g.rng.IntN(2) == 0, CountOnly: g.rng.IntN(4) == 0,
		MinModRevision: g.rev() * int64(g.rng.IntN(2)), MaxCreateRevision: g.rev() * int64(g.rng.IntN(2))}
}

func (g *reqGen) putReq() *pb.PutRequest {
	return &pb.PutRequest{Key: g.key(), Value: make([]byte, g.rng.IntN(64)), Lease: g.leaseID() * int64(g.rng.IntN(2)),
		PrevKv: g.rng.IntN(2) == 0, IgnoreValue: g.rng.IntN(6) == 0, IgnoreLease: g.rng.IntN(6) == 0}
}

func (g *reqGen) deleteReq() *pb.DeleteRangeRequest {
	return &pb.DeleteRangeRequest{Key: g.key(), RangeEnd: g.rangeEnd(), PrevKv: g.rng.IntN(2) == 0}
}

func (g *reqGen) txnReq(depth int) *pb.TxnRequest {
	r := &pb.TxnRequest{}
	for range g.rng.IntN(3) {
		r.Compare = append(r.Compare, &pb.Compare{Key: g.key(), RangeEnd: g.rangeEnd(),
			Result: pb.Compare_CompareResult(g.rng.IntN(5)), Target: pb.Compare_CompareTarget(g.rng.IntN(6)),
			TargetUnion: &pb.Compare_ModRevision{ModRevision: g.rev()}})
	}
	for _, ops := range []*[]*pb.RequestOp{&r.Success, &r.Failure} {
		for range g.rng.IntN(4) {
			var op *pb.RequestOp
			switch n := g.rng.IntN(4); {
			case n == 3 && depth > 0:
				op = &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: g.txnReq(depth - 1)}}
			case n == 0:
				op = &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: g.rangeReq()}}
			case n == 1:
				op = &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: g.deleteReq()}}
			default:
				op = &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: g.putReq()}}
			}
			*ops = append(*ops, op)
		}
	}
	return r
}

// malformed turns a well-formed encoding into bytes that may not parse:
// flipped bytes, a cut, or noise.
func (g *reqGen) malformed(good []byte) []byte {
	b := append([]byte(nil), good...)
	switch g.rng.IntN(3) {
	case 0:
		for range 1 + g.rng.IntN(4) {
			if len(b) > 0 {
				b[g.rng.IntN(len(b))] ^= byte(1 + g.rng.IntN(255))
			}
		}
	case 1:
		if len(b) > 0 {
			b = b[:g.rng.IntN(len(b))]
		}
	default:
		b = make([]byte, g.rng.IntN(64))
		for i := range b {
			b[i] = byte(g.rng.Uint32())
		}
	}
	return b
}

// headerOf is the response header of a decoded response, if it has one.
func headerOf(m wireMessage) *pb.ResponseHeader {
	if h, ok := m.(interface{ GetHeader() *pb.ResponseHeader }); ok {
		return h.GetHeader()
	}
	return nil
}

// TestRequestFuzzer sends random well-formed and malformed requests to a
// live member for -reqfuzz.duration. The member must never crash, never
// leave a request unanswered, never answer with a revision older than one
// it answered before, and must serve normally afterwards.
func TestRequestFuzzer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), *fuzzDuration+2*time.Minute)
	defer cancel()
	c := framework.NewCluster(t, framework.ClusterConfig{})
	m := c.Member(0)
	conn, err := grpc.NewClient(m.Endpoint(), grpc.WithTransportCredentials(m.GRPCCredentials(t)), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	g := &reqGen{rng: rand.New(rand.NewPCG(seed, 0x72657166))}
	codeCounts := map[codes.Code]int{}
	calls := 0
	end := time.Now().Add(*fuzzDuration)
	for time.Now().Before(end) {
		meth := fuzzMethods[g.rng.IntN(len(fuzzMethods))]
		req, err := meth.req(g).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		wellFormed := g.rng.IntN(3) != 0
		if !wellFormed {
			req = g.malformed(req)
		}
		var out []byte
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err = conn.Invoke(cctx, meth.name, &req, &out)
		ccancel()
		calls++
		codeCounts[status.Code(err)]++
		select {
		case <-m.Exited():
			t.Fatalf("the member died on %s (well-formed: %v, %x)", meth.name, wellFormed, req)
		default:
		}
		if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
			t.Fatalf("%s went unanswered for 10 s (well-formed: %v, %x)", meth.name, wellFormed, req)
		}
		if err != nil {
			continue
		}
		resp := meth.resp()
		if err := resp.Unmarshal(out); err != nil {
			t.Fatalf("%s answered with bytes that do not parse as %T: %v", meth.name, resp, err)
		}
		if h := headerOf(resp); h != nil && h.Revision != 0 {
			if h.Revision < g.lastRev {
				t.Fatalf("%s answered at revision %d after an answer at %d", meth.name, h.Revision, g.lastRev)
			}
			g.lastRev = h.Revision
		}
	}
	t.Logf("%d calls; codes %v", calls, codeCounts)

	cli := m.NewClient(t)
	put, err := cli.Put(ctx, "/fz/after", "ok")
	if err != nil {
		t.Fatalf("put after the fuzzing: %v", err)
	}
	got, err := cli.Get(ctx, "/fz/after")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "ok" || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("get after the fuzzing: %v, %v", got, err)
	}
}
