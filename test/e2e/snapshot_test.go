package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

const (
	// snapshotTimeout is the deadline of a save-and-restore test: two
	// clusters are started.
	snapshotTimeout = 3 * time.Minute
	// snapshotLeaseTTL outlives the test, so the restored lease is
	// still granted when it is checked.
	snapshotLeaseTTL = 600
	// snapshotDigestSize is the sha256 digest a snapshot file ends with.
	snapshotDigestSize = 32
)

// sourceState is what was written before a snapshot was saved.
type sourceState struct {
	rev       int64 // store revision at the snapshot
	leaseID   clientv3.LeaseID
	kvs       map[string]int64 // key -> mod revision, at the snapshot
	clusterID uint64
}

// writeSourceState puts keys (two on a lease), overwrites and deletes one,
// so that revisions, versions and tombstones are all in the snapshot.
func writeSourceState(ctx context.Context, t *testing.T, cli *clientv3.Client) sourceState {
	t.Helper()
	for i := range 10 {
		mustPut(ctx, t, cli, fmt.Sprintf("/snap/key/%02d", i), fmt.Sprintf("value %d", i))
	}
	mustPut(ctx, t, cli, "/snap/key/03", "overwritten")
	if _, err := cli.Delete(ctx, "/snap/key/04"); err != nil {
		t.Fatal(err)
	}
	grant, err := cli.Grant(ctx, snapshotLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(ctx, t, cli, "/snap/leased/a", "x", clientv3.WithLease(grant.ID))
	mustPut(ctx, t, cli, "/snap/leased/b", "y", clientv3.WithLease(grant.ID))
	resp := mustGet(ctx, t, cli, "/snap/", clientv3.WithPrefix())
	st := sourceState{rev: resp.Header.Revision, leaseID: grant.ID, kvs: map[string]int64{}, clusterID: resp.Header.ClusterId}
	for _, kv := range resp.Kvs {
		st.kvs[string(kv.Key)] = kv.ModRevision
	}
	return st
}

// waitStorageVersion polls m until its Status reports the storage
// version. etcd writes it into its backend a moment after start-up, and
// until then sends snapshots without a version (etcdctl then prints no
// "Server version" line); MetaStore reports it from the start.
func waitStorageVersion(ctx context.Context, t *testing.T, m *framework.Member) {
	t.Helper()
	cli := m.NewClient(t)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		st, err := cli.Status(ctx, m.Endpoint())
		if err == nil && st.StorageVersion == "3.6.0" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("member %s never reported storage version 3.6.0 (last: %v, %v)", m.Name(), st, err)
		case <-poll.C:
		}
	}
}

// saveSnapshot runs `etcdctl snapshot save` against m and checks that it
// prints exactly what it prints against etcd.
func saveSnapshot(ctx context.Context, t *testing.T, c *framework.Cluster, m *framework.Member) string {
	t.Helper()
	waitStorageVersion(ctx, t, m)
	path := filepath.Join(t.TempDir(), "backup.db")
	ctl := framework.NewEtcdctl(framework.EtcdctlPath(c.RepoRoot()), []string{m.Endpoint()}, c.EtcdctlTLSFlags()...)
	res, err := ctl.Run(ctx, "snapshot", "save", path)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("etcdctl snapshot save exited %d:\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if want := fmt.Sprintf("Snapshot saved at %s\nServer version 3.6.0\n", path); res.Stdout != want {
		t.Fatalf("etcdctl snapshot save printed %q, want %q", res.Stdout, want)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// etcdctl itself only keeps a file whose size says it ends with a
	// sha256 digest; check it did not just get lucky.
	if info.Size()%512 != snapshotDigestSize {
		t.Fatalf("snapshot file of %d bytes does not end with a digest", info.Size())
	}
	if _, err := os.Stat(path + ".part"); !os.IsNotExist(err) {
		t.Fatalf("etcdctl left its .part file behind: %v", err)
	}
	return path
}

func TestSnapshotSaveWithEtcdctl(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	s := startServer(t, framework.ClusterConfig{})
	writeSourceState(ctx, t, s.cli)
	saveSnapshot(ctx, t, s.cluster, s.member())
	waitForLog(ctx, t, s.member(), "sending database snapshot to client")
	waitForLog(ctx, t, s.member(), "successfully sent database snapshot to client")
}

// flagValue is the last value of --name=value in args ("" if absent).
func flagValue(args []string, name string) string {
	value := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			value = v
		}
	}
	return value
}

// runSnapshotTool runs `snapshot status|restore` with the tool of c's
// target (etcdutl for etcd, metastore for MetaStore) and returns its
// combined output.
func runSnapshotTool(ctx context.Context, t *testing.T, c *framework.Cluster, args ...string) (string, error) {
	t.Helper()
	return runTool(ctx, c.Target().SnapshotTool(c.RepoRoot()), args...)
}

// runTool runs the binary at tool and returns its combined output.
func runTool(ctx context.Context, tool string, args ...string) (string, error) {
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(runCtx, tool, args...)
	cmd.Env = framework.ProcessEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// restoreInto replaces the data dirs of c's members (stopped) with
// restores of the snapshot at path, made by the tool of c's target with
// each member's own flags plus extra, and starts them again.
func restoreInto(ctx context.Context, t *testing.T, c *framework.Cluster, path string, extra ...string) {
	t.Helper()
	restoreWith(ctx, t, c, c.Target().SnapshotTool(c.RepoRoot()), path, extra...)
}

// restoreWith is restoreInto with the restore tool at tool: etcdutl
// restores into a MetaStore cluster's data dirs as well.
func restoreWith(ctx context.Context, t *testing.T, c *framework.Cluster, tool, path string, extra ...string) {
	t.Helper()
	for _, m := range c.Members() {
		if _, err := m.Stop(stopTimeout); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.Members() {
		if err := os.RemoveAll(m.DataDir()); err != nil {
			t.Fatal(err)
		}
		args := m.Args()
		restore := []string{"snapshot", "restore", path,
			"--data-dir=" + m.DataDir(),
			"--name=" + m.Name(),
			"--initial-cluster=" + flagValue(args, "initial-cluster"),
			"--initial-cluster-token=" + flagValue(args, "initial-cluster-token"),
			"--initial-advertise-peer-urls=" + m.PeerURL()}
		if tool == framework.TargetMetaStore.SnapshotTool(c.RepoRoot()) {
			restore = append(restore, "--storage-engine="+cmp.Or(flagValue(args, "storage-engine"), "memory"))
		}
		out, err := runTool(ctx, tool, append(restore, extra...)...)
		if err != nil {
			t.Fatalf("%s for %s: %v\n%s", strings.Join(restore[:2], " "), m.Name(), err, out)
		}
	}
	for _, m := range c.Members() {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("restored cluster not ready: %v", err)
	}
}

// requireRestoredState checks, through cli, that the store is the
// snapshot's: same keys at the same revisions, the later writes absent,
// the lease granted with its keys, and the member list is c's alone.
func requireRestoredState(ctx context.Context, t *testing.T, c *framework.Cluster, cli *clientv3.Client, src sourceState) {
	t.Helper()
	resp := mustGet(ctx, t, cli, "/snap/", clientv3.WithPrefix())
	if resp.Header.Revision != src.rev {
		t.Fatalf("restored store at revision %d, want the snapshot's %d", resp.Header.Revision, src.rev)
	}
	if resp.Header.ClusterId == src.clusterID {
		t.Fatalf("restored cluster kept the source's cluster ID %x", src.clusterID)
	}
	got := map[string]int64{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = kv.ModRevision
	}
	if fmt.Sprint(got) != fmt.Sprint(src.kvs) {
		t.Fatalf("restored keys (key: mod revision) %v, want %v", got, src.kvs)
	}
	ttl, err := cli.TimeToLive(ctx, src.leaseID, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	keys := attachedKeys(ttl)
	if ttl.GrantedTTL != snapshotLeaseTTL || ttl.TTL <= 0 || !slices.Equal(keys, []string{"/snap/leased/a", "/snap/leased/b"}) {
		t.Fatalf("restored lease: granted %d, remaining %d, keys %v; want %d, >0, both leased keys", ttl.GrantedTTL, ttl.TTL, keys, snapshotLeaseTTL)
	}
	members, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var peerURLs, want []string
	for _, m := range members.Members {
		peerURLs = append(peerURLs, m.PeerURLs...)
	}
	for _, m := range c.Members() {
		want = append(want, m.PeerURL())
	}
	slices.Sort(peerURLs)
	slices.Sort(want)
	if !slices.Equal(peerURLs, want) {
		t.Fatalf("restored member list has peers %v, want the new cluster's %v", peerURLs, want)
	}
	put := mustPut(ctx, t, cli, "/snap/after-restore", "v")
	if put.Header.Revision != src.rev+1 {
		t.Fatalf("first write after restore got revision %d, want %d", put.Header.Revision, src.rev+1)
	}
}

// snapshotStatus runs `snapshot status -w json` with the target's tool.
func snapshotStatus(ctx context.Context, t *testing.T, c *framework.Cluster, path string) (st struct {
	Revision  int64 `json:"revision"`
	TotalKey  int64 `json:"totalKey"`
	TotalSize int64 `json:"totalSize"`
}) {
	t.Helper()
	out, err := runSnapshotTool(ctx, t, c, "snapshot", "status", path, "-w", "json")
	if err != nil {
		t.Fatalf("snapshot status: %v\n%s", err, out)
	}
	// etcdutl logs to stderr; the status is the last line.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &st); err != nil {
		t.Fatalf("snapshot status printed %q: %v", out, err)
	}
	return st
}

func TestSnapshotRestoreOneMember(t *testing.T) {
	t.Parallel()
	engines := []string{"memory", "rocksdb"}
	if target, _ := framework.TargetFromEnv(); target == framework.TargetEtcd {
		engines = []string{"bbolt"} // etcd has one
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, snapshotTimeout)
			src := startServer(t, framework.ClusterConfig{})
			state := writeSourceState(ctx, t, src.cli)
			path := saveSnapshot(ctx, t, src.cluster, src.member())
			// Writes after the snapshot must not survive the restore.
			mustPut(ctx, t, src.cli, "/snap/key/00", "changed later")
			mustPut(ctx, t, src.cli, "/snap/later", "v")
			if _, err := src.cli.Delete(ctx, "/snap/key/05"); err != nil {
				t.Fatal(err)
			}

			st := snapshotStatus(ctx, t, src.cluster, path)
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Revision != state.rev || st.TotalKey != int64(len(state.kvs)) || st.TotalSize != info.Size()-snapshotDigestSize {
				t.Fatalf("snapshot status %+v: want revision %d, %d keys, size %d", st, state.rev, len(state.kvs), info.Size()-snapshotDigestSize)
			}

			// The restored member runs the engine under test (unless
			// E2E_EXTRA_FLAGS picks one; restoreInto follows the member).
			var flags []string
			if engine != "bbolt" {
				flags = []string{"--storage-engine=" + engine}
			}
			dst := framework.NewCluster(t, framework.ClusterConfig{ExtraFlags: flags})
			restoreInto(ctx, t, dst, path)
			requireRestoredState(ctx, t, dst, dst.NewClient(t), state)
		})
	}
}

func TestSnapshotRestoreThreeMembersFormACluster(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, snapshotTimeout)
	src := startServer(t, framework.ClusterConfig{})
	state := writeSourceState(ctx, t, src.cli)
	path := saveSnapshot(ctx, t, src.cluster, src.member())

	dst := framework.NewCluster(t, framework.ClusterConfig{Size: 3})
	restoreInto(ctx, t, dst, path)
	requireRestoredState(ctx, t, dst, dst.Member(0).NewClient(t), state)
	// The write made through member 0 is replicated: each member serves
	// it with a linearizable read of its own.
	for _, m := range dst.Members() {
		resp := mustGet(ctx, t, m.NewClient(t), "/snap/after-restore")
		if len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != state.rev+1 {
			t.Fatalf("member %s: /snap/after-restore is %v, want it at revision %d", m.Name(), resp.Kvs, state.rev+1)
		}
	}
}

func TestSnapshotRestoreRefusesADamagedFile(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, testTimeout)
	s := startServer(t, framework.ClusterConfig{})
	writeSourceState(ctx, t, s.cli)
	path := saveSnapshot(ctx, t, s.cluster, s.member())
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.db")
	if err := os.WriteFile(truncated, data[:len(data)-1], 0o600); err != nil {
		t.Fatal(err)
	}
	flipped := slices.Clone(data)
	flipped[len(flipped)/2] ^= 1
	damaged := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(damaged, flipped, 0o600); err != nil {
		t.Fatal(err)
	}
	// etcdutl's refusals, which MetaStore's restore gives in its words.
	for path, want := range map[string]string{
		truncated: "snapshot missing hash but --skip-hash-check=false",
		damaged:   "expected sha256",
	} {
		dataDir := filepath.Join(t.TempDir(), "restored")
		out, err := runSnapshotTool(ctx, t, s.cluster, "snapshot", "restore", path, "--data-dir="+dataDir)
		if err == nil {
			t.Fatalf("snapshot restore accepted %s:\n%s", path, out)
		}
		if !strings.Contains(out, want) {
			t.Fatalf("snapshot restore of %s does not say %q:\n%s", path, want, out)
		}
		if entries, _ := os.ReadDir(dataDir); len(entries) > 0 {
			// etcdutl leaves the copied db behind; MetaStore nothing.
			if s.cluster.Target() == framework.TargetMetaStore {
				t.Fatalf("a refused restore left %v in the data dir", entries)
			}
		}
	}
}
