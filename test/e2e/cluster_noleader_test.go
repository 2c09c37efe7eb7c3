package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// noLeaderRequestTimeout is how long a write waits for a leader
	// before it fails: etcd's request timeout, 5 s + 2 election timeouts.
	noLeaderRequestTimeout = 5*time.Second + 2*electionTimeout
	// noLeaderBound is that plus slack for a loaded machine.
	noLeaderBound = 15 * time.Second
)

// TestClusterNoLeader leaves one member of three running: it loses its
// leader, and requests then fail as etcd's do, never hang: at once with
// "etcdserver: no leader" when the client requires a leader; writes (put,
// txn, delete, lease grant) otherwise after the request timeout with
// gRPC's DeadlineExceeded "context deadline exceeded", as etcd 3.6 does
// (its "etcdserver: request timed out" is for a write raft took but could
// not commit); member list and serializable reads are still served.
func TestClusterNoLeader(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	mc := newMemberClients(t, c)
	survivor := c.Member(0)
	cli := mc.of(t, survivor)
	mustPut(ctx, t, cli, "/noleader/before", "1")
	for _, m := range c.Members()[1:] {
		if _, err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := survivor.WaitNoLeader(ctx, cli); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	_, err := cli.Put(clientv3.WithRequireLeader(ctx), "/noleader/k", "v")
	if err == nil || err.Error() != rpctypes.ErrNoLeader.Error() {
		t.Fatalf("put requiring a leader: %v, want %v", err, rpctypes.ErrNoLeader)
	}
	// "At once" as against the request timeout the other writes wait
	// below: half of it leaves a loaded machine seconds of slack.
	if took := time.Since(start); took > noLeaderRequestTimeout/2 {
		t.Fatalf("put requiring a leader took %v to fail, want at once (well within the %v request timeout)", took, noLeaderRequestTimeout)
	}

	// Plain gRPC stubs: clientv3 would retry a request the server gave up
	// on with a deadline error, hiding how long the server itself waits.
	conn, err := grpc.NewClient(survivor.Endpoint(), grpc.WithTransportCredentials(survivor.GRPCCredentials(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv, leases, cluster := pb.NewKVClient(conn), pb.NewLeaseClient(conn), pb.NewClusterClient(conn)
	reqCtx, cancel := context.WithTimeout(ctx, 4*noLeaderBound)
	defer cancel()
	if _, err := cluster.MemberList(reqCtx, &pb.MemberListRequest{}); err != nil {
		t.Fatalf("member list without a leader: %v, want it served locally", err)
	}
	writes := map[string]func() error{
		"put": func() error {
			_, err := kv.Put(reqCtx, &pb.PutRequest{Key: []byte("/noleader/k"), Value: []byte("v")})
			return err
		},
		"txn": func() error {
			_, err := kv.Txn(reqCtx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{
				RequestPut: &pb.PutRequest{Key: []byte("/noleader/k"), Value: []byte("v")}}}}})
			return err
		},
		"delete": func() error {
			_, err := kv.DeleteRange(reqCtx, &pb.DeleteRangeRequest{Key: []byte("/noleader/before")})
			return err
		},
		"lease grant": func() error {
			_, err := leases.LeaseGrant(reqCtx, &pb.LeaseGrantRequest{TTL: 60})
			return err
		},
	}
	var wg sync.WaitGroup
	failures := make(chan string, 2*len(writes))
	for name, write := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := write()
			took := time.Since(start)
			t.Logf("%s without a leader failed after %v: %v", name, took.Round(time.Millisecond), err)
			if reqCtx.Err() != nil {
				failures <- fmt.Sprintf("%s without a leader still waiting after %v", name, took)
				return
			}
			// etcd returns raft's error for a proposal raft never took
			// unchanged, and gRPC turns it into this status.
			if st, _ := status.FromError(err); err == nil || st.Code() != codes.DeadlineExceeded || st.Message() != context.DeadlineExceeded.Error() {
				failures <- fmt.Sprintf("%s without a leader: %v, want code DeadlineExceeded, message %q", name, err, context.DeadlineExceeded.Error())
			}
			if took < noLeaderRequestTimeout || took > noLeaderBound {
				failures <- fmt.Sprintf("%s without a leader failed after %v, want the request timeout %v (at most %v)", name, took, noLeaderRequestTimeout, noLeaderBound)
			}
		}()
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}

	// A linearizable read's ReadIndex round gets no answer either; etcd's
	// read loop gives up on it after the request timeout (a read that
	// arrives while a round is in flight waits for the next one, so up to
	// twice that) with ErrTimeout.
	start = time.Now()
	_, err = kv.Range(reqCtx, &pb.RangeRequest{Key: []byte("/noleader/before")})
	took := time.Since(start)
	t.Logf("linearizable range without a leader failed after %v: %v", took.Round(time.Millisecond), err)
	if st, _ := status.FromError(err); err == nil || st.Code() != codes.Unavailable || st.Message() != rpctypes.ErrTimeout.Error() {
		t.Errorf("linearizable range without a leader: %v, want code Unavailable, message %q", err, rpctypes.ErrTimeout.Error())
	}
	if took < noLeaderRequestTimeout || took > 2*noLeaderBound {
		t.Errorf("linearizable range without a leader failed after %v, want the request timeout %v (at most %v)", took, noLeaderRequestTimeout, 2*noLeaderBound)
	}

	if got := mustGet(ctx, t, cli, "/noleader/before", clientv3.WithSerializable()); len(got.Kvs) != 1 {
		t.Fatalf("serializable read without a leader: %v", got.Kvs)
	}
	rctx, cancel := context.WithTimeout(ctx, isolatedRequestTimeout)
	defer cancel()
	if _, err := cli.Get(rctx, "/noleader/before"); err == nil {
		t.Fatal("a member without a leader served a linearizable read")
	}
}
