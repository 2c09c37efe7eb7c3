package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	"github.com/metastore-io/metastore/test/framework"
)

// quotaTestBytes is a quota small enough to fill in a few dozen puts on
// every engine (etcd's bbolt file, MetaStore's memory engine and RocksDB's
// SST files plus memtables), large enough that an empty member is below it.
const quotaTestBytes = 4 << 20

// fillQuota overwrites one key with 100 kB values until a put fails, and
// requires that failure to be etcd's "database space exceeded".
func fillQuota(ctx context.Context, t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	value := strings.Repeat("x", 100_000)
	for i := 0; i < 3*quotaTestBytes/len(value); i++ {
		if _, err := cli.Put(ctx, key, value); err != nil {
			requireNoSpace(t, err)
			return
		}
	}
	t.Fatalf("%d puts of %d bytes never exceeded a quota of %d bytes", 3*quotaTestBytes/len(value), len(value), quotaTestBytes)
}

// requireNoSpace requires a clientv3 error to be etcd's ResourceExhausted
// "etcdserver: mvcc: database space exceeded".
func requireNoSpace(t *testing.T, err error) {
	t.Helper()
	var ee rpctypes.EtcdError
	if !errors.As(err, &ee) || ee.Code() != codes.ResourceExhausted || ee.Error() != rpctypes.ErrNoSpace.Error() {
		t.Fatalf("got error %v, want %v (ResourceExhausted)", err, rpctypes.ErrNoSpace)
	}
}

// requireEtcdctl runs etcdctl and requires it to succeed with this output.
func requireEtcdctl(ctx context.Context, t *testing.T, ctl *framework.Etcdctl, want string, args ...string) {
	t.Helper()
	res, err := ctl.Run(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.Stdout != want {
		t.Fatalf("etcdctl %s: exit %d, stdout %q, want %q (stderr %s)", strings.Join(args, " "), res.ExitCode, res.Stdout, want, res.Stderr)
	}
}

// healthOf fetches /health (with an optional query) and returns the status
// code and body.
func healthOf(ctx context.Context, t *testing.T, m *framework.Member, query string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL()+"/health"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.HTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// TestQuotaNoSpaceAlarm fills a member past --quota-backend-bytes: the put
// that does not fit fails with etcd's "database space exceeded", the
// member raises a NOSPACE alarm that etcdctl lists, Status reports and
// /health fails on (unless ?exclude=NOSPACE); puts, txns with puts and
// lease grants fail while reads and deletes work; the alarm survives a
// restart; after compaction, defragmentation and `alarm disarm` writes
// succeed again.
func TestQuotaNoSpaceAlarm(t *testing.T) {
	s := startServer(t, framework.ClusterConfig{ExtraFlags: []string{"--quota-backend-bytes=" + strconv.Itoa(quotaTestBytes)}})
	ctx := testContext(t, 2*testTimeout)
	m := s.member()
	ctl := s.cluster.Etcdctl()
	mustPut(ctx, t, s.cli, "/quota/small", "v")
	fillQuota(ctx, t, s.cli, "/quota/big")

	st, err := s.cli.Status(ctx, m.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	id := st.Header.MemberId
	wantList := fmt.Sprintf("memberID:%d alarm:NOSPACE \n", id)
	requireEtcdctl(ctx, t, ctl, wantList, "alarm", "list")
	if st.DbSizeQuota != quotaTestBytes {
		t.Errorf("status dbSizeQuota = %d, want %d", st.DbSizeQuota, quotaTestBytes)
	}
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "alarm:NOSPACE") {
		t.Errorf("status errors = %q, want the NOSPACE alarm", st.Errors)
	}
	if code, body := healthOf(ctx, t, m, ""); code != http.StatusServiceUnavailable || body != `{"health":"false","reason":"ALARM NOSPACE"}` {
		t.Errorf("/health with NOSPACE: %d %s", code, body)
	}
	if code, body := healthOf(ctx, t, m, "?exclude=NOSPACE"); code != http.StatusOK || body != `{"health":"true","reason":""}` {
		t.Errorf("/health?exclude=NOSPACE: %d %s", code, body)
	}

	// Under the alarm: nothing that grows the store, everything else.
	_, err = s.cli.Put(ctx, "/quota/tiny", "v")
	requireNoSpace(t, err)
	_, err = s.cli.Txn(ctx).Then(clientv3.OpPut("/quota/tiny", "v")).Commit()
	requireNoSpace(t, err)
	_, err = s.cli.Grant(ctx, 60)
	requireNoSpace(t, err)
	if got := mustGet(ctx, t, s.cli, "/quota/small"); len(got.Kvs) != 1 {
		t.Fatalf("read under NOSPACE: %v", got.Kvs)
	}
	if _, err := s.cli.Txn(ctx).Then(clientv3.OpGet("/quota/small")).Commit(); err != nil {
		t.Fatalf("read-only txn under NOSPACE: %v", err)
	}
	if resp, err := s.cli.Delete(ctx, "/quota/small"); err != nil || resp.Deleted != 1 {
		t.Fatalf("delete under NOSPACE: %v %v", resp, err)
	}

	// The alarm is replicated state: it survives a restart.
	if _, err := m.Stop(stopTimeout); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	requireEtcdctl(ctx, t, ctl, wantList, "alarm", "list")

	rev := strconv.FormatInt(currentRevisionOf(ctx, t, m), 10)
	requireEtcdctl(ctx, t, ctl, "compacted revision "+rev+"\n", "compact", rev)
	if res, err := ctl.Run(ctx, "defrag"); err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "Finished defragmenting etcd member[") {
		t.Fatalf("defrag under NOSPACE: %v %+v", err, res)
	}
	requireEtcdctl(ctx, t, ctl, wantList, "alarm", "disarm")
	requireEtcdctl(ctx, t, ctl, "", "alarm", "list")
	requireEtcdctl(ctx, t, ctl, "OK\n", "put", "/quota/after", "v")
	if code, _ := healthOf(ctx, t, m, ""); code != http.StatusOK {
		t.Errorf("/health after disarm: %d", code)
	}
}

// currentRevisionOf reads the store revision from a fresh client of m (the
// member may have restarted since the test's client connected).
func currentRevisionOf(ctx context.Context, t *testing.T, m *framework.Member) int64 {
	t.Helper()
	cli := m.NewClient(t)
	return currentRevision(ctx, t, cli)
}

// TestQuotaNoSpaceAlarmCluster: in a 3-member cluster the NOSPACE alarm is
// replicated state. Once one member runs out of quota every member refuses
// puts with "database space exceeded" and lists the alarm, reads keep
// working everywhere, and after compaction, defragmentation of every
// member and `alarm disarm` writes succeed through every member again.
func TestQuotaNoSpaceAlarmCluster(t *testing.T) {
	t.Parallel()
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 3, ExtraFlags: []string{"--quota-backend-bytes=" + strconv.Itoa(quotaTestBytes)}})
	ctx := testContext(t, 2*testTimeout)
	ctl := c.Etcdctl()
	members := c.Members()
	first := members[0].NewClient(t)
	mustPut(ctx, t, first, "/quota/small", "v")
	fillQuota(ctx, t, first, "/quota/big")

	for _, m := range members {
		cli := m.NewClient(t)
		_, err := cli.Put(ctx, "/quota/tiny", "v")
		requireNoSpace(t, err)
		if got := mustGet(ctx, t, cli, "/quota/small"); len(got.Kvs) != 1 {
			t.Fatalf("read from %s under NOSPACE: %v", m.Name(), got.Kvs)
		}
		alarms, err := cli.AlarmList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(alarms.Alarms) == 0 {
			t.Fatalf("%s lists no alarm under NOSPACE", m.Name())
		}
		for _, a := range alarms.Alarms {
			if a.Alarm.String() != "NOSPACE" {
				t.Fatalf("%s lists alarm %v, want only NOSPACE", m.Name(), a)
			}
		}
	}

	rev := strconv.FormatInt(currentRevision(ctx, t, first), 10)
	requireEtcdctl(ctx, t, ctl, "compacted revision "+rev+"\n", "compact", rev)
	res, err := ctl.Run(ctx, "defrag", "--cluster")
	if err != nil || res.ExitCode != 0 || strings.Count(res.Stdout, "Finished defragmenting etcd member[") != len(members) {
		t.Fatalf("defrag --cluster under NOSPACE: %v %+v", err, res)
	}
	if res, err := ctl.Run(ctx, "alarm", "disarm"); err != nil || res.ExitCode != 0 {
		t.Fatalf("alarm disarm: %v %+v", err, res)
	}
	requireEtcdctl(ctx, t, ctl, "", "alarm", "list")
	for i, m := range members {
		mustPut(ctx, t, m.NewClient(t), "/quota/after/"+strconv.Itoa(i), "v")
	}
}
