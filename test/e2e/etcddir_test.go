package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// targetEngines are the storage engines a test that picks them itself
// runs: MetaStore's two, or etcd's one.
func targetEngines(t *testing.T) []string {
	t.Helper()
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if target == framework.TargetEtcd {
		return []string{"bbolt"} // etcd has one
	}
	skipIfEngineFromEnv(t)
	return []string{"memory", "rocksdb"}
}

func engineFlags(engine string) []string {
	if engine == "bbolt" {
		return nil
	}
	return []string{"--storage-engine=" + engine}
}

// TestEtcdutlRestoredDataDir restores a snapshot saved from a running
// member with etcdutl (whatever the target), as etcd's TestIssue6361
// does, and starts the target's server on the restored data dir: it
// serves every key at its revisions, the leases, users and roles and the
// compaction point, with the restore's member list, and takes writes.
func TestEtcdutlRestoredDataDir(t *testing.T) {
	t.Parallel()
	for _, engine := range targetEngines(t) {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, snapshotTimeout)
			src := startServer(t, framework.ClusterConfig{ExtraFlags: engineFlags(engine)})
			compactAt := writeInteropState(ctx, t, src.cli)
			want := dumpStore(ctx, t, src.cli, compactAt)
			path := saveSnapshot(ctx, t, src.cluster, src.member())

			dst := framework.NewCluster(t, framework.ClusterConfig{ExtraFlags: engineFlags(engine)})
			restoreWith(ctx, t, dst, framework.EtcdutlPath(dst.RepoRoot()), path)
			cli := dst.NewClient(t)
			requireSameDump(t, "started on etcdutl's restore", dumpStore(ctx, t, cli, compactAt), want)
			members, err := cli.MemberList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(members.Members) != 1 || members.Members[0].Name != "m0" ||
				fmt.Sprint(members.Members[0].PeerURLs) != fmt.Sprint([]string{dst.Member(0).PeerURL()}) {
				t.Fatalf("member list after the restore: %v", members.Members)
			}
			if put := mustPut(ctx, t, cli, "/interop/after", "v"); put.Header.Revision != want.rev+1 {
				t.Fatalf("first write after the restore at revision %d, want %d", put.Header.Revision, want.rev+1)
			}
		})
	}
}

// etcdDirCase is an etcd member whose data dir MetaStore is started on.
type etcdDirCase struct {
	name, binary, engine string
	// kill ends etcd with SIGKILL after writes its db does not hold yet
	// (etcd is told to commit its db only when a snapshot is saved), so
	// the conversion must replay them from etcd's WAL.
	kill bool
}

// TestMetaStoreOnEtcdDataDir starts MetaStore on the data dir of a
// 1-member etcd 3.6 and 3.5, stopped cleanly or killed: it converts the
// dir and serves the same keys at the same revisions, the leases with
// their TTLs, the compaction point, the users and roles with auth on,
// under etcd's member and cluster IDs, and restarts from the converted
// dir.
func TestMetaStoreOnEtcdDataDir(t *testing.T) {
	framework.SkipUnlessMetaStore(t, "starting on an etcd member's data dir")
	skipIfEngineFromEnv(t)
	t.Parallel()
	for _, tc := range []etcdDirCase{
		{name: "3.6-stopped", binary: "bin/ref/etcd", engine: "memory"},
		{name: "3.6-killed", binary: "bin/ref/etcd", engine: "rocksdb", kill: true},
		{name: "3.5-stopped", binary: etcd35Binary, engine: "rocksdb"},
		{name: "3.5-killed", binary: etcd35Binary, engine: "memory", kill: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testMetaStoreOnEtcdDataDir(t, tc)
		})
	}
}

func testMetaStoreOnEtcdDataDir(t *testing.T, tc etcdDirCase) {
	ctx := testContext(t, snapshotTimeout)
	var flags []string
	if tc.kill {
		flags = []string{"--backend-batch-interval=1h", "--backend-batch-limit=1000000"}
	}
	src := framework.NewCluster(t, framework.ClusterConfig{Target: framework.TargetEtcd, Binary: tc.binary, ExtraFlags: flags})
	m := src.Member(0)
	cli := src.NewClient(t)
	compactAt := writeInteropState(ctx, t, cli)
	enableAuthWithRoot(ctx, t, src, cli)
	root := m.NewClient(t)
	if tc.kill {
		commitEtcdDB(ctx, t, root)
		writeAfterDBCommit(ctx, t, root)
	}
	want := dumpStore(ctx, t, root, compactAt)
	wantMembers, err := root.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tail []*clientv3.PutResponse
	if tc.kill {
		// Reading the dump may make etcd 3.6 commit its db; these
		// writes, acknowledged, are in its WAL alone when it is killed.
		for i := range 20 {
			tail = append(tail, mustPut(ctx, t, root, fmt.Sprintf("/interop/tail/%02d", i), strconv.Itoa(i)))
		}
		if _, err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	} else if _, err := m.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}

	m.SetBinary(framework.TargetMetaStore.BinaryPath(src.RepoRoot()))
	m.SetArgs(append(m.Args(), "--storage-engine="+tc.engine))
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitReady(ctx); err != nil {
		t.Fatalf("MetaStore on etcd's data dir: %v", err)
	}
	if tc.kill {
		requireReplayed(t, m)
	}
	if _, err := os.Stat(filepath.Join(m.DataDir(), "member.etcd", "snap", "db")); err != nil {
		t.Fatalf("etcd's files are not kept: %v", err)
	}
	requireSameEtcdMember(ctx, t, m, want, wantMembers, compactAt)
	lastRev := want.rev
	for i, p := range tail {
		got := mustGet(ctx, t, m.NewClient(t), fmt.Sprintf("/interop/tail/%02d", i))
		if len(got.Kvs) != 1 || got.Kvs[0].ModRevision != p.Header.Revision || string(got.Kvs[0].Value) != strconv.Itoa(i) {
			t.Fatalf("acknowledged put %d (revision %d) on MetaStore: %v", i, p.Header.Revision, got.Kvs)
		}
		lastRev = p.Header.Revision
	}
	put := mustPut(ctx, t, m.NewClient(t), "/interop/after", "v")
	if put.Header.Revision != lastRev+1 {
		t.Fatalf("first write on MetaStore at revision %d, want %d", put.Header.Revision, lastRev+1)
	}
	// Once converted the dir is MetaStore's own.
	if _, err := m.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(ctx, t, m.NewClient(t), "/interop/after"); len(got.Kvs) != 1 || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("after a restart of the converted dir: %v", got.Kvs)
	}
}

// commitEtcdDB makes etcd commit its db: it commits the pending
// transaction before it streams a snapshot. With the batch interval at
// an hour, what is written next is in etcd's WAL alone.
func commitEtcdDB(ctx context.Context, t *testing.T, cli *clientv3.Client) {
	t.Helper()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatal(err)
	}
}

// writeAfterDBCommit writes a user, a lease with a key, puts, a delete
// and a txn, each acknowledged. The puts come last: etcd 3.6 commits its
// db when it grants a lease or changes a user.
func writeAfterDBCommit(ctx context.Context, t *testing.T, cli *clientv3.Client) {
	t.Helper()
	if _, err := cli.UserAdd(ctx, "bob", "pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "bob", "reader"); err != nil {
		t.Fatal(err)
	}
	grant, err := cli.Grant(ctx, 1200)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(ctx, t, cli, "/interop/wal/leased", "l", clientv3.WithLease(grant.ID))
	for i := range 20 {
		mustPut(ctx, t, cli, fmt.Sprintf("/interop/wal/%02d", i), strconv.Itoa(i))
	}
	if _, err := cli.Delete(ctx, "/interop/wal/0", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut("/interop/wal/txn", "t"), clientv3.OpDelete("/interop/wal/15")).Commit(); err != nil {
		t.Fatal(err)
	}
}

// replayedEntries finds the conversion's count of WAL entries past etcd's db.
var replayedEntries = regexp.MustCompile(`"wal-entries-to-replay":(\d+)`)

// requireReplayed checks, in the member's log, that the conversion
// found entries in etcd's WAL past its db: the kill case tests nothing
// otherwise.
func requireReplayed(t *testing.T, m *framework.Member) {
	t.Helper()
	data, err := os.ReadFile(m.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	match := replayedEntries.FindSubmatch(data)
	if match == nil {
		t.Fatal("the log does not report the conversion's WAL entries")
	}
	if n, _ := strconv.Atoi(string(match[1])); n < 20 {
		t.Fatalf("the conversion replays %d WAL entries; the puts after the dump are 20", n)
	}
}

// requireSameEtcdMember checks that MetaStore serves etcd's state: the
// dump, and the member list with etcd's IDs.
func requireSameEtcdMember(ctx context.Context, t *testing.T, m *framework.Member, want storeDump,
	wantMembers *clientv3.MemberListResponse, compactAt int64) {
	t.Helper()
	cli := m.NewClient(t)
	requireSameDump(t, "MetaStore on etcd's data dir", dumpStoreUpTo(ctx, t, cli, compactAt, want.rev), want)
	got, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Header.ClusterId != wantMembers.Header.ClusterId || len(got.Members) != 1 ||
		got.Members[0].ID != wantMembers.Members[0].ID || got.Members[0].Name != wantMembers.Members[0].Name {
		t.Fatalf("member list on MetaStore: cluster %x %v, want cluster %x %v",
			got.Header.ClusterId, got.Members, wantMembers.Header.ClusterId, wantMembers.Members)
	}
}
