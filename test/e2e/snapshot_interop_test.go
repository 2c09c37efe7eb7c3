package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// storeDump is everything a client can observe of a store's data: the
// value of every key at every revision still held (create and mod
// revision, version, lease included), the compacted revisions, and the
// leases with their granted TTLs and keys.
type storeDump struct {
	rev     int64
	history []string // one line per key per revision, from compacted+1 to rev
	leases  []string
	auth    []string // users with their roles, roles with their permissions
}

// dumpStore reads the dump of the store behind cli, from revision
// firstRev (the compaction point) to the current one; reads below
// firstRev must fail as compacted.
func dumpStore(ctx context.Context, t *testing.T, cli *clientv3.Client, firstRev int64) storeDump {
	t.Helper()
	return dumpStoreUpTo(ctx, t, cli, firstRev, currentRevision(ctx, t, cli))
}

// dumpStoreUpTo is dumpStore of the revisions up to lastRev.
func dumpStoreUpTo(ctx context.Context, t *testing.T, cli *clientv3.Client, firstRev, lastRev int64) storeDump {
	t.Helper()
	d := storeDump{rev: lastRev}
	if _, err := cli.Get(ctx, "x", clientv3.WithRev(firstRev-1)); err != rpctypes.ErrCompacted && !strings.Contains(fmt.Sprint(err), "compacted") {
		t.Fatalf("read at %d, below the compaction: %v, want compacted", firstRev-1, err)
	}
	for rev := firstRev; rev <= d.rev; rev++ {
		resp := mustGet(ctx, t, cli, "\x00", clientv3.WithFromKey(), clientv3.WithRev(rev))
		for _, kv := range resp.Kvs {
			d.history = append(d.history, fmt.Sprintf("@%d %q=%q create=%d mod=%d version=%d lease=%x",
				rev, kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease))
		}
	}
	leases, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Leases {
		ttl, err := cli.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys())
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL <= 0 {
			t.Fatalf("lease %x expired after the restore", l.ID)
		}
		d.leases = append(d.leases, fmt.Sprintf("%x granted=%d keys=%v", l.ID, ttl.GrantedTTL, attachedKeys(ttl)))
	}
	slices.Sort(d.leases)
	d.auth = dumpAuth(ctx, t, cli)
	return d
}

// dumpAuth lists the users with their roles and the roles with their
// permissions.
func dumpAuth(ctx context.Context, t *testing.T, cli *clientv3.Client) []string {
	t.Helper()
	users, err := cli.UserList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range users.Users {
		u, err := cli.UserGet(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("user %s roles=%v", name, u.Roles))
	}
	roles, err := cli.RoleList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range roles.Roles {
		r, err := cli.RoleGet(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range r.Perm {
			out = append(out, fmt.Sprintf("role %s %s [%q, %q)", name, p.PermType, p.Key, p.RangeEnd))
		}
	}
	return out
}

func requireSameDump(t *testing.T, what string, got, want storeDump) {
	t.Helper()
	if got.rev != want.rev {
		t.Fatalf("%s: revision %d, want %d", what, got.rev, want.rev)
	}
	if !slices.Equal(got.leases, want.leases) {
		t.Fatalf("%s: leases\n%v\nwant\n%v", what, got.leases, want.leases)
	}
	if !slices.Equal(got.auth, want.auth) {
		t.Fatalf("%s: users and roles\n%v\nwant\n%v", what, got.auth, want.auth)
	}
	if len(got.history) != len(want.history) {
		t.Fatalf("%s: %d key versions over the history, want %d", what, len(got.history), len(want.history))
	}
	for i := range got.history {
		if got.history[i] != want.history[i] {
			t.Fatalf("%s: history line %d is\n%s\nwant\n%s", what, i, got.history[i], want.history[i])
		}
	}
}

// writeInteropState writes keys with history (overwrites, deletes and
// re-creations, multi-op txns with sub revisions), two leases, and
// compacts half way; it returns the compaction revision.
func writeInteropState(ctx context.Context, t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	for i := range 40 {
		mustPut(ctx, t, cli, fmt.Sprintf("/interop/%03d", i), fmt.Sprintf("v%d", i))
	}
	for i := range 10 {
		mustPut(ctx, t, cli, fmt.Sprintf("/interop/%03d", i*3), fmt.Sprintf("again %d", i))
	}
	compactAt := currentRevision(ctx, t, cli)
	if _, err := cli.Delete(ctx, "/interop/01", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	mustPut(ctx, t, cli, "/interop/012", "re-created")
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpPut("/interop/txn/a", "1"), clientv3.OpPut("/interop/txn/b", "2"), clientv3.OpDelete("/interop/020"),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []int64{600, 900} {
		grant, err := cli.Grant(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		mustPut(ctx, t, cli, fmt.Sprintf("/interop/leased/%d/a", ttl), "x", clientv3.WithLease(grant.ID))
		mustPut(ctx, t, cli, fmt.Sprintf("/interop/leased/%d/b", ttl), "y", clientv3.WithLease(grant.ID))
	}
	mustPut(ctx, t, cli, "/interop/binary", "\x00\xff\n")
	// Users and roles (authentication stays off, so the dumps need no
	// credentials).
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "alice", "secret"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "reader"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "reader", "/interop/", clientv3.GetPrefixRangeEnd("/interop/"), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "reader", "/other", "", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserGrantRole(ctx, "alice", "reader"); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Compact(ctx, compactAt); err != nil {
		t.Fatal(err)
	}
	return compactAt
}

// skipIfEngineFromEnv skips a test that picks MetaStore's engines itself
// when E2E_EXTRA_FLAGS picks one for every member.
func skipIfEngineFromEnv(t *testing.T) {
	t.Helper()
	if strings.Contains(os.Getenv(framework.ExtraFlagsEnvVar), "--storage-engine") {
		t.Skipf("%s chooses the storage engine; this test runs both", framework.ExtraFlagsEnvVar)
	}
}

// TestSnapshotInteropEtcdToMetaStoreAndBack moves a store from a real
// etcd to MetaStore and back with snapshot files alone (etcdctl snapshot
// save, metastore snapshot restore, etcdctl snapshot save against
// MetaStore, etcdutl snapshot restore) and checks that every key,
// revision, version, lease and the compaction point survive each move.
// It runs both servers whatever E2E_TARGET says.
func TestSnapshotInteropEtcdToMetaStoreAndBack(t *testing.T) {
	skipIfEngineFromEnv(t)
	t.Parallel()
	for _, engine := range []string{"memory", "rocksdb"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, snapshotTimeout)
			src := framework.NewCluster(t, framework.ClusterConfig{Target: framework.TargetEtcd})
			srcCli := src.NewClient(t)
			compactAt := writeInteropState(ctx, t, srcCli)
			want := dumpStore(ctx, t, srcCli, compactAt)
			if len(want.history) < 200 || len(want.leases) != 2 || len(want.auth) != 3 {
				t.Fatalf("the source dump holds %d key versions, %d leases and %v: the comparison would prove little", len(want.history), len(want.leases), want.auth)
			}
			fromEtcd := saveSnapshot(ctx, t, src, src.Member(0))

			ms := framework.NewCluster(t, framework.ClusterConfig{Target: framework.TargetMetaStore,
				ExtraFlags: []string{"--storage-engine=" + engine}})
			restoreInto(ctx, t, ms, fromEtcd)
			requireSameDump(t, "MetaStore restored from etcd", dumpStore(ctx, t, ms.NewClient(t), compactAt), want)

			fromMetaStore := saveSnapshot(ctx, t, ms, ms.Member(0))
			back := framework.NewCluster(t, framework.ClusterConfig{Target: framework.TargetEtcd})
			st := snapshotStatus(ctx, t, back, fromMetaStore) // etcdutl's
			if st.Revision != want.rev {
				t.Fatalf("etcdutl snapshot status of MetaStore's file: revision %d, want %d", st.Revision, want.rev)
			}
			restoreInto(ctx, t, back, fromMetaStore)
			requireSameDump(t, "etcd restored from MetaStore", dumpStore(ctx, t, back.NewClient(t), compactAt), want)
		})
	}
}

// TestSnapshotRestoreKubernetesStyle restores with --bump-revision
// --mark-compacted, as Kubernetes' restore procedure does, with the
// target's tool: the revision jumps by the bump, every revision a client
// saw before is compacted (a watch resuming from one is told so), and
// the keys keep their revisions.
func TestSnapshotRestoreKubernetesStyle(t *testing.T) {
	t.Parallel()
	const bump = 1_000_000_000
	ctx := testContext(t, snapshotTimeout)
	src := startServer(t, framework.ClusterConfig{})
	state := writeSourceState(ctx, t, src.cli)
	path := saveSnapshot(ctx, t, src.cluster, src.member())

	dst := framework.NewCluster(t, framework.ClusterConfig{})
	restoreInto(ctx, t, dst, path, fmt.Sprintf("--bump-revision=%d", bump), "--mark-compacted")
	cli := dst.NewClient(t)
	resp := mustGet(ctx, t, cli, "/snap/", clientv3.WithPrefix())
	if resp.Header.Revision != state.rev+bump {
		t.Fatalf("restored revision %d, want %d", resp.Header.Revision, state.rev+bump)
	}
	got := map[string]int64{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = kv.ModRevision
	}
	if fmt.Sprint(got) != fmt.Sprint(state.kvs) {
		t.Fatalf("restored keys (key: mod revision) %v, want %v", got, state.kvs)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wresp, ok := <-cli.Watch(wctx, "/snap/", clientv3.WithPrefix(), clientv3.WithRev(state.rev))
	if !ok || wresp.Err() != rpctypes.ErrCompacted || wresp.CompactRevision != state.rev+bump {
		t.Fatalf("watch from the old revision %d: %v (compact revision %d), want compacted at %d", state.rev, wresp.Err(), wresp.CompactRevision, state.rev+bump)
	}
	if _, err := cli.Get(ctx, "/snap/key/00", clientv3.WithRev(state.rev)); err != rpctypes.ErrCompacted {
		t.Fatalf("read at the old revision: %v, want %v", err, rpctypes.ErrCompacted)
	}
	if put := mustPut(ctx, t, cli, "/snap/after", "v"); put.Header.Revision != state.rev+bump+1 {
		t.Fatalf("first write after the restore at revision %d, want %d", put.Header.Revision, state.rev+bump+1)
	}
}

// TestMakeMirrorFromEtcd copies a live etcd into the target with
// `etcdctl make-mirror`: the keys present when it starts, then the ones
// written while it runs.
func TestMakeMirrorFromEtcd(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, snapshotTimeout)
	src := framework.NewCluster(t, framework.ClusterConfig{Target: framework.TargetEtcd})
	srcCli := src.NewClient(t)
	const keys = 100
	for i := range keys {
		mustPut(ctx, t, srcCli, fmt.Sprintf("/mirror/%03d", i), fmt.Sprintf("v%d", i))
	}
	dst := startServer(t, framework.ClusterConfig{})
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	watch := dst.cli.Watch(wctx, "/mirror/", clientv3.WithPrefix())

	mctx, stopMirror := context.WithCancel(ctx)
	defer stopMirror()
	args := []string{"make-mirror", "--prefix=/mirror/"}
	if destTLS := dst.cluster.EtcdctlTLSFlags(); len(destTLS) > 0 {
		// make-mirror names the destination's TLS flags --dest-*.
		for _, f := range destTLS {
			args = append(args, "--dest-"+strings.TrimPrefix(f, "--"))
		}
		args = append(args, "--dest-insecure-transport=false")
	}
	ctl := framework.NewEtcdctl(framework.EtcdctlPath(src.RepoRoot()), []string{src.Member(0).Endpoint()}, src.EtcdctlTLSFlags()...)
	mirror := ctl.Command(mctx, append(args, dst.member().Endpoint())...)
	var out strings.Builder
	mirror.Stdout, mirror.Stderr = &out, &out
	if err := mirror.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- mirror.Wait() }()
	defer func() {
		stopMirror()
		<-exited // killed by the context: its exit status says nothing
	}()

	seen := map[string]string{}
	wrote := false
	for len(seen) < keys+1 {
		select {
		case wresp, ok := <-watch:
			if !ok || wresp.Err() != nil {
				t.Fatalf("watch on the mirror ended: %v", wresp.Err())
			}
			for _, ev := range wresp.Events {
				seen[string(ev.Kv.Key)] = string(ev.Kv.Value)
			}
		case err := <-exited:
			exited <- err
			t.Fatalf("make-mirror exited (%v) with the mirror holding %d of %d keys; it printed:\n%s", err, len(seen), keys+1, out.String())
		case <-ctx.Done():
			stopMirror()
			exited <- <-exited // its output is complete once it has exited
			t.Fatalf("the mirror holds %d of %d keys; make-mirror printed:\n%s", len(seen), keys+1, out.String())
		}
		if len(seen) == keys && !wrote {
			mustPut(ctx, t, srcCli, "/mirror/live", "written while mirroring")
			wrote = true
		}
	}
	if seen["/mirror/live"] != "written while mirroring" || seen["/mirror/042"] != "v42" {
		t.Fatalf("mirrored values: live=%q 042=%q", seen["/mirror/live"], seen["/mirror/042"])
	}
	resp := mustGet(ctx, t, dst.cli, "/mirror/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if resp.Count != keys+1 {
		t.Fatalf("the mirror holds %d keys, want %d", resp.Count, keys+1)
	}
}

// etcd35Binary is etcd 3.5's server, built by make tools.
const etcd35Binary = "bin/ref/etcd-3.5"

// TestSnapshotFromEtcd35 restores the snapshot of an etcd 3.5 (whose file
// records no storage version) into MetaStore with every key, revision
// and lease, as an upgrade from a 3.5 cluster needs.
func TestSnapshotFromEtcd35(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, snapshotTimeout)
	src := framework.NewCluster(t, framework.ClusterConfig{Target: framework.TargetEtcd, Binary: etcd35Binary})
	srcCli := src.NewClient(t)
	compactAt := writeInteropState(ctx, t, srcCli)
	want := dumpStore(ctx, t, srcCli, compactAt)

	path := filepath.Join(t.TempDir(), "etcd35.db")
	ctl := framework.NewEtcdctl(framework.EtcdctlPath(src.RepoRoot()), []string{src.Member(0).Endpoint()}, src.EtcdctlTLSFlags()...)
	res, err := ctl.Run(ctx, "snapshot", "save", path)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("etcdctl snapshot save from etcd 3.5: %v, exit %d:\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	ms := framework.NewCluster(t, framework.ClusterConfig{Target: framework.TargetMetaStore})
	if st := snapshotStatus(ctx, t, ms, path); st.Revision != want.rev {
		t.Fatalf("metastore snapshot status of etcd 3.5's file: revision %d, want %d", st.Revision, want.rev)
	}
	restoreInto(ctx, t, ms, path)
	requireSameDump(t, "MetaStore restored from etcd 3.5", dumpStore(ctx, t, ms.NewClient(t), compactAt), want)
}
