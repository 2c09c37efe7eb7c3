package sdk

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// targetsEnvVar narrows the run to some targets ("metastore", "etcd").
	targetsEnvVar = "SDK_TARGETS"
	// scenarioTimeout bounds one scenario, waits on lease expiry included.
	scenarioTimeout = 60 * time.Second
	// shortTTL is the lease TTL, in seconds, of scenarios that wait for a
	// lease to expire: etcd's minimum with its default timing is 2 s.
	shortTTL = 2
)

// targets lists the servers every behavioural test runs against.
func targets(t *testing.T) []framework.Target {
	t.Helper()
	spec := os.Getenv(targetsEnvVar)
	if spec == "" {
		return []framework.Target{framework.TargetMetaStore, framework.TargetEtcd}
	}
	var out []framework.Target
	for _, name := range strings.Fields(spec) {
		switch target := framework.Target(name); target {
		case framework.TargetMetaStore, framework.TargetEtcd:
			out = append(out, target)
		default:
			t.Fatalf("%s=%q: unknown target %q", targetsEnvVar, spec, name)
		}
	}
	return out
}

// env is one running single-member cluster of one target.
type env struct {
	target  framework.Target
	cluster *framework.Cluster
}

// forEachTarget starts a cluster of each target in turn and runs body
// against it as a subtest named after the target. Subtests of body may
// run in parallel with each other.
func forEachTarget(t *testing.T, cfg framework.ClusterConfig, body func(t *testing.T, e *env)) {
	for _, target := range targets(t) {
		t.Run(string(target), func(t *testing.T) {
			// NewCluster reads the target from the environment; Setenv is
			// undone when this subtest (and its parallel children) end.
			t.Setenv(framework.TargetEnvVar, string(target))
			body(t, &env{target: target, cluster: framework.NewCluster(t, cfg)})
		})
	}
}

// newClient returns a client with its own connection, closed when t ends.
func (e *env) newClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.cluster.Endpoints(),
		DialTimeout: framework.DefaultDialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// endpoint is the first member's host:port.
func (e *env) endpoint() string { return e.cluster.Endpoints()[0] }

// keyPrefix is a key prefix no other scenario uses: the test's name.
func keyPrefix(t *testing.T) string {
	return "/sdk/" + t.Name()
}

// testContext ends after timeout or when t ends, whichever is first.
func testContext(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// waitForKeys blocks until at least n keys exist under prefix. It watches
// the prefix from the revision of its first read, so no put is missed.
func waitForKeys(ctx context.Context, cli *clientv3.Client, prefix string, n int64) error {
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("count %s: %w", prefix, err)
	}
	count := resp.Count
	if count >= n {
		return nil
	}
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range cli.Watch(watchCtx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return fmt.Errorf("watch %s: %w", prefix, err)
		}
		for _, ev := range wr.Events {
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				count--
			case ev.IsCreate():
				count++
			}
		}
		if count >= n {
			return nil
		}
	}
	return fmt.Errorf("waiting for %d keys under %s (have %d): %w", n, prefix, count, ctx.Err())
}

// keysUnder lists the keys under prefix.
func keysUnder(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("list %s: %v", prefix, err)
	}
	keys := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		keys[i] = string(kv.Key)
	}
	return keys
}
