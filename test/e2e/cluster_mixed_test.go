package e2e

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// refusedEtcdPeer is what a MetaStore member answers an etcd member's raft
// traffic with (internal/cluster/transport), and logs.
const refusedEtcdPeer = "metastore: raft traffic with etcd members is not supported yet"

// TestMixedKindLearnerRefusedSafely adds a member of the other kind to a
// running one-member cluster as a learner, both ways: a MetaStore member
// joining an etcd cluster, and an etcd member joining a MetaStore cluster.
// Both speak etcd's peer protocol, but until a MetaStore member applies
// etcd's raft entries neither may take the other's raft traffic. The
// joiner finds the running cluster (etcd's /members) and the two reach
// each other's streams, which proves each accepted the other's headers
// (versions, cluster ID, X-Raft-To); the MetaStore side then refuses, and
// both members keep running, the running cluster keeps serving.
//
// MetaStore-only: it runs a cluster of each kind itself, whatever
// E2E_TARGET says.
func TestMixedKindLearnerRefusedSafely(t *testing.T) {
	framework.SkipUnlessMetaStore(t, "a cluster of MetaStore and etcd members")
	for _, tc := range []struct {
		name            string
		running, joiner framework.Target
	}{
		{"metastore joins etcd", framework.TargetEtcd, framework.TargetMetaStore},
		{"etcd joins metastore", framework.TargetMetaStore, framework.TargetEtcd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, clusterTestTimeout)
			c := framework.NewCluster(t, framework.ClusterConfig{Size: 1, Target: tc.running})
			running := c.Member(0)
			cli := c.NewClient(t)
			mustPut(ctx, t, cli, "/mixed/before", "v")

			joiner, err := c.NewJoiningMember("other")
			if err != nil {
				t.Fatal(err)
			}
			joiner.SetBinary(tc.joiner.BinaryPath(c.RepoRoot()))
			if tc.joiner == framework.TargetEtcd {
				joiner.WithoutEnvFlags() // --storage-engine and the like are MetaStore's
			}
			added := runEtcdctlRetrying(ctx, t, c.Etcdctl(), "member", "add", joiner.Name(), "--peer-urls="+joiner.PeerURL(), "--learner")
			m := initialClusterLine.FindStringSubmatch(added)
			if m == nil {
				t.Fatalf("member add printed no ETCD_INITIAL_CLUSTER:\n%s", added)
			}
			if err := joiner.Join(m[1]); err != nil {
				t.Fatal(err)
			}

			metastore, etcd := joiner, running
			if tc.joiner == framework.TargetEtcd {
				metastore, etcd = running, joiner
			}
			// The etcd member answered the MetaStore member's stream (200:
			// it took its headers), which the MetaStore member does not read.
			waitForLog(ctx, t, metastore, "is an etcd member (etcd 3.6.16): "+refusedEtcdPeer)
			// The etcd member's streams are refused, with the answer etcd
			// only logs and retries.
			waitForLog(ctx, t, metastore, "refused peer request: member ")
			waitForLog(ctx, t, etcd, refusedEtcdPeer)

			// Neither side stopped, and the running cluster serves writes.
			mustPut(ctx, t, cli, "/mixed/after", "v")
			if !running.Running() || !joiner.Running() {
				t.Fatalf("running member up: %v, joiner up: %v", running.Running(), joiner.Running())
			}
			if got := mustGet(ctx, t, cli, "/mixed/", clientv3.WithPrefix(), clientv3.WithCountOnly()); got.Count != 2 {
				t.Fatalf("the running cluster counts %d keys under /mixed/, want 2", got.Count)
			}
		})
	}
}
