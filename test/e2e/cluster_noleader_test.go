package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/metastore-io/metastore/test/framework"
)

// noLeaderBound is how long a request may wait for a leader before it
// fails: the request timeout (5 s + 2 election timeouts) plus slack.
const noLeaderBound = 15 * time.Second

// TestClusterNoLeader leaves one member of three running: it loses its
// leader, and requests then fail as etcd's do, never hang: at once with
// "etcdserver: no leader" when the client requires a leader, after the
// request timeout otherwise; serializable reads are still served.
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
	for {
		st, err := mc.status(ctx, t, survivor)
		if err != nil {
			t.Fatalf("status of %s: %v", survivor.Name(), err)
		}
		if st.Leader == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still follows %x with no quorum", survivor.Name(), st.Leader)
		case <-time.After(pollInterval):
		}
	}

	start := time.Now()
	_, err := cli.Put(clientv3.WithRequireLeader(ctx), "/noleader/k", "v")
	if err == nil || err.Error() != rpctypes.ErrNoLeader.Error() {
		t.Fatalf("put requiring a leader: %v, want %v", err, rpctypes.ErrNoLeader)
	}
	if took := time.Since(start); took > electionTimeout {
		t.Fatalf("put requiring a leader took %v to fail, want at once", took)
	}

	// A plain gRPC stub: clientv3 would retry a put the server gave up on
	// with a deadline error, hiding how long the server itself waits.
	conn, err := grpc.NewClient(survivor.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	putCtx, cancel := context.WithTimeout(ctx, 4*noLeaderBound)
	defer cancel()
	start = time.Now()
	_, err = pb.NewKVClient(conn).Put(putCtx, &pb.PutRequest{Key: []byte("/noleader/k"), Value: []byte("v")})
	took := time.Since(start)
	if putCtx.Err() != nil {
		t.Fatalf("put without a leader still waiting after %v", took)
	}
	// etcd answers its own request timeout with "context deadline
	// exceeded", MetaStore with "etcdserver: no leader".
	if err == nil || !(strings.Contains(err.Error(), "etcdserver: no leader") ||
		strings.Contains(err.Error(), "etcdserver: request timed out") ||
		strings.Contains(err.Error(), "context deadline exceeded")) {
		t.Fatalf("put without a leader: %v, want a no-leader or timeout error", err)
	}
	if took > noLeaderBound {
		t.Fatalf("put without a leader failed only after %v", took)
	}
	t.Logf("put without a leader failed after %v: %v", took.Round(time.Millisecond), err)

	if got := mustGet(ctx, t, cli, "/noleader/before", clientv3.WithSerializable()); len(got.Kvs) != 1 {
		t.Fatalf("serializable read without a leader: %v", got.Kvs)
	}
	rctx, cancel := context.WithTimeout(ctx, isolatedRequestTimeout)
	defer cancel()
	if _, err := cli.Get(rctx, "/noleader/before"); err == nil {
		t.Fatal("a member without a leader served a linearizable read")
	}
}

// TestClusterRefusesForeignDataDir starts a member on the data dir of
// another member of its cluster: it refuses to start, naming the data dir
// and both identities, and the data dir stays usable by its owner. etcd
// restarts from any data dir (its peers refuse it later), so this is
// MetaStore's behaviour only.
func TestClusterRefusesForeignDataDir(t *testing.T) {
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	if c.Target() != framework.TargetMetaStore {
		t.Skip("etcd does not check a data dir against its flags")
	}
	ctx := testContext(t, clusterTestTimeout)
	m0, m1 := c.Member(0), c.Member(1)
	if _, err := m1.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	// m1's command line and ports, but m0's name and peer URL.
	var args []string
	for _, a := range m1.Args() {
		switch {
		case strings.HasPrefix(a, "--name="):
			a = "--name=" + m0.Name()
		case strings.HasPrefix(a, "--initial-advertise-peer-urls="):
			a = "--initial-advertise-peer-urls=" + m0.PeerURL()
		}
		args = append(args, a)
	}
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(runCtx, c.Target().BinaryPath(c.RepoRoot()), args...).CombinedOutput()
	if err == nil {
		t.Fatalf("a member started on another member's data dir:\n%s", out)
	}
	if runCtx.Err() != nil {
		t.Fatalf("refusing a foreign data dir did not end the process: %v", runCtx.Err())
	}
	msg := string(out)
	if !strings.Contains(msg, "belongs to member") || !strings.Contains(msg, m1.DataDir()) {
		t.Fatalf("refusal does not name the data dir and its member:\n%s", msg)
	}
	if err := m1.Restart(ctx); err != nil {
		t.Fatalf("the data dir's own member cannot restart after the refusal: %v", err)
	}
}
