package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/pkg/concurrency/v3electionpb"
	"github.com/metastore-io/metastore/pkg/concurrency/v3lockpb"
	"github.com/metastore-io/metastore/test/framework"
)

// noQuorumBound is how long a member without quorum may take to answer a
// request that waits for the request timeout (noLeaderRequestTimeout, 7 s):
// that plus 4 s for a loaded two-core machine, still far below the
// "never" of a request that hangs.
const noQuorumBound = noLeaderRequestTimeout + 4*time.Second

// noQuorumCall is one gRPC request to a member without quorum and etcd's
// answer to it: code OK (served locally) or the error's code and message,
// at once or after the request timeout (waits).
type noQuorumCall struct {
	name  string
	call  func(ctx context.Context) error
	code  codes.Code
	msg   string
	waits bool
}

// noQuorumRPCs connects every gRPC method group etcd serves: etcd's
// answers to them on a member without quorum (a lease and a key exist).
type noQuorumRPCs struct {
	kv      pb.KVClient
	lease   pb.LeaseClient
	watch   pb.WatchClient
	cluster pb.ClusterClient
	maint   pb.MaintenanceClient
	auth    pb.AuthClient
	lock    v3lockpb.LockClient
	elect   v3electionpb.ElectionClient
	leaseID int64
}

func newNoQuorumRPCs(conn *grpc.ClientConn, leaseID int64) noQuorumRPCs {
	return noQuorumRPCs{kv: pb.NewKVClient(conn), lease: pb.NewLeaseClient(conn), watch: pb.NewWatchClient(conn),
		cluster: pb.NewClusterClient(conn), maint: pb.NewMaintenanceClient(conn), auth: pb.NewAuthClient(conn),
		lock: v3lockpb.NewLockClient(conn), elect: v3electionpb.NewElectionClient(conn), leaseID: leaseID}
}

var (
	deadlineExceeded = context.DeadlineExceeded.Error()
	requestTimedOut  = rpctypes.ErrTimeout.Error()
	noLeader         = rpctypes.ErrNoLeader.Error()
)

// proposals are the requests that go through Raft: etcd's raft holds a
// proposal back while it knows no leader, and the request fails with the
// proposal context's error after the request timeout. They run
// concurrently.
func (r noQuorumRPCs) proposals() []noQuorumCall {
	key := []byte("/noquorum/k")
	put := &pb.PutRequest{Key: key, Value: []byte("v")}
	wait := func(name string, call func(ctx context.Context) error) noQuorumCall {
		return noQuorumCall{name: name, call: call, code: codes.DeadlineExceeded, msg: deadlineExceeded, waits: true}
	}
	return []noQuorumCall{
		wait("KV.Put", func(ctx context.Context) error { _, err := r.kv.Put(ctx, put); return err }),
		wait("KV.DeleteRange", func(ctx context.Context) error {
			_, err := r.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: key})
			return err
		}),
		wait("KV.Txn", func(ctx context.Context) error {
			_, err := r.kv.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: put}}}})
			return err
		}),
		wait("KV.Compact", func(ctx context.Context) error {
			_, err := r.kv.Compact(ctx, &pb.CompactionRequest{Revision: 1})
			return err
		}),
		wait("Lease.LeaseGrant", func(ctx context.Context) error {
			_, err := r.lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{TTL: 60})
			return err
		}),
		wait("Lease.LeaseRevoke", func(ctx context.Context) error {
			_, err := r.lease.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: r.leaseID})
			return err
		}),
		wait("Maintenance.Alarm", func(ctx context.Context) error {
			_, err := r.maint.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
			return err
		}),
		wait("Auth.UserList", func(ctx context.Context) error {
			_, err := r.auth.UserList(ctx, &pb.AuthUserListRequest{})
			return err
		}),
		wait("Lock.Lock", func(ctx context.Context) error {
			_, err := r.lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("/noquorum/lock"), Lease: r.leaseID})
			return err
		}),
		wait("Lock.Unlock", func(ctx context.Context) error {
			_, err := r.lock.Unlock(ctx, &v3lockpb.UnlockRequest{Key: []byte("/noquorum/lock/0")})
			return err
		}),
		wait("Election.Campaign", func(ctx context.Context) error {
			_, err := r.elect.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte("/noquorum/election"), Lease: r.leaseID, Value: []byte("x")})
			return err
		}),
	}
}

// forwards are the lease requests a follower forwards to the leader: etcd
// waits for a leader until the request timeout and then answers "no
// leader". They run concurrently with the proposals.
func (r noQuorumRPCs) forwards() []noQuorumCall {
	return []noQuorumCall{
		{name: "Lease.LeaseKeepAlive", code: codes.Unavailable, msg: noLeader, waits: true, call: func(ctx context.Context) error {
			stream, err := r.lease.LeaseKeepAlive(ctx)
			if err != nil {
				return err
			}
			if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: r.leaseID}); err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}},
		{name: "Lease.LeaseTimeToLive", code: codes.Unavailable, msg: noLeader, waits: true, call: func(ctx context.Context) error {
			_, err := r.lease.LeaseTimeToLive(ctx, &pb.LeaseTimeToLiveRequest{ID: r.leaseID})
			return err
		}},
	}
}

// local are the requests a member serves from its own state, and
// MemberAdd, which etcd refuses at once when the cluster is unhealthy.
func (r noQuorumRPCs) local() []noQuorumCall {
	key := []byte("/noquorum/k")
	return []noQuorumCall{
		{name: "KV.Range serializable", call: func(ctx context.Context) error {
			_, err := r.kv.Range(ctx, &pb.RangeRequest{Key: key, Serializable: true})
			return err
		}},
		{name: "Lease.LeaseLeases", call: func(ctx context.Context) error {
			_, err := r.lease.LeaseLeases(ctx, &pb.LeaseLeasesRequest{})
			return err
		}},
		{name: "Watch create", call: func(ctx context.Context) error {
			stream, err := r.watch.Watch(ctx)
			if err != nil {
				return err
			}
			create := &pb.WatchCreateRequest{Key: key}
			if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: create}}); err != nil {
				return err
			}
			resp, err := stream.Recv()
			if err == nil && !resp.Created {
				return fmt.Errorf("first watch response %+v is not the creation", resp)
			}
			return err
		}},
		{name: "Cluster.MemberList", call: func(ctx context.Context) error {
			_, err := r.cluster.MemberList(ctx, &pb.MemberListRequest{})
			return err
		}},
		{name: "Cluster.MemberAdd", code: codes.Unavailable, msg: rpctypes.ErrUnhealthy.Error(), call: func(ctx context.Context) error {
			_, err := r.cluster.MemberAdd(ctx, &pb.MemberAddRequest{PeerURLs: []string{"http://127.0.0.1:1"}})
			return err
		}},
		{name: "Maintenance.Status", call: func(ctx context.Context) error {
			_, err := r.maint.Status(ctx, &pb.StatusRequest{})
			return err
		}},
		{name: "Maintenance.HashKV", call: func(ctx context.Context) error {
			_, err := r.maint.HashKV(ctx, &pb.HashKVRequest{})
			return err
		}},
	}
}

// reads are the linearizable reads: the member's ReadIndex round gets no
// answer and etcd's read loop gives up on it after the request timeout.
// A read arriving while a round is in flight waits for the next, so they
// run one after the other.
func (r noQuorumRPCs) reads() []noQuorumCall {
	return []noQuorumCall{
		{name: "KV.Range linearizable", code: codes.Unavailable, msg: requestTimedOut, waits: true, call: func(ctx context.Context) error {
			_, err := r.kv.Range(ctx, &pb.RangeRequest{Key: []byte("/noquorum/k")})
			return err
		}},
		{name: "Cluster.MemberList linearizable", code: codes.Unavailable, msg: requestTimedOut, waits: true, call: func(ctx context.Context) error {
			_, err := r.cluster.MemberList(ctx, &pb.MemberListRequest{Linearizable: true})
			return err
		}},
	}
}

// check runs c once and returns what is wrong with its answer, "" when it
// is etcd's. Twice noQuorumBound tells an answer that never comes.
func (c noQuorumCall) check(ctx context.Context, t *testing.T) string {
	ctx, cancel := context.WithTimeout(ctx, 2*noQuorumBound)
	defer cancel()
	start := time.Now()
	err := c.call(ctx)
	took := time.Since(start)
	st, _ := status.FromError(err)
	t.Logf("no quorum: %-32s %v after %v", c.name, err, took.Round(time.Millisecond))
	var problems []string
	if st.Code() != c.code || (c.code != codes.OK && st.Message() != c.msg) {
		problems = append(problems, fmt.Sprintf("answered %v, want code %v, message %q", err, c.code, c.msg))
	}
	switch {
	case ctx.Err() != nil:
		problems = append(problems, fmt.Sprintf("no answer within %v", took))
	case c.waits && (took < noLeaderRequestTimeout-time.Second || took > noQuorumBound):
		problems = append(problems, fmt.Sprintf("answered after %v, want the request timeout %v (at most %v)", took, noLeaderRequestTimeout, noQuorumBound))
	case !c.waits && took > noLeaderRequestTimeout/2:
		problems = append(problems, fmt.Sprintf("answered after %v, want at once (well within the %v request timeout)", took, noLeaderRequestTimeout))
	}
	if problems == nil {
		return ""
	}
	return c.name + ": " + strings.Join(problems, "; ")
}

// TestClusterNoQuorumAnswers leaves one member of three running and sends
// it a request of every gRPC service, on plain stubs (clientv3 retries
// some failures on its own, hiding the member's answer): each answers as
// etcd's does, served locally or failing with etcd's code and message, at
// once or after the request timeout, and none hangs. Once the killed
// members are back, the same connection is served again.
func TestClusterNoQuorumAnswers(t *testing.T) {
	ctx := testContext(t, clusterTestTimeout)
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	mc := newMemberClients(t, c)
	survivor := c.Member(0)
	cli := mc.of(t, survivor)
	mustPut(ctx, t, cli, "/noquorum/k", "1")
	grant, err := cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(survivor.Endpoint(), grpc.WithTransportCredentials(survivor.GRPCCredentials(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpcs := newNoQuorumRPCs(conn, int64(grant.ID))

	killed := c.Members()[1:]
	for _, m := range killed {
		if _, err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := survivor.WaitNoLeader(ctx, cli); err != nil {
		t.Fatal(err)
	}

	concurrent := append(append(rpcs.proposals(), rpcs.forwards()...), rpcs.local()...)
	failures := make(chan string, len(concurrent))
	for _, call := range concurrent {
		go func() { failures <- call.check(ctx, t) }()
	}
	for range concurrent {
		if f := <-failures; f != "" {
			t.Error(f)
		}
	}
	for _, call := range rpcs.reads() {
		if f := call.check(ctx, t); f != "" {
			t.Error(f)
		}
	}

	for _, m := range killed {
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mc.waitLeader(ctx, t, c.Members())
	// The same connection, and the client that was there all along.
	if _, err := rpcs.kv.Put(ctx, &pb.PutRequest{Key: []byte("/noquorum/k"), Value: []byte("after")}); err != nil {
		t.Fatalf("put on the same connection once quorum is back: %v", err)
	}
	if _, err := rpcs.lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("/noquorum/lock"), Lease: int64(grant.ID)}); err != nil {
		t.Fatalf("v3lock Lock once quorum is back: %v", err)
	}
	if got := mustGet(ctx, t, cli, "/noquorum/k"); len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "after" {
		t.Fatalf("linearizable get once quorum is back: %v", got.Kvs)
	}
}
