package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// etcdctlHeader mirrors the header etcdctl prints with -w json.
type etcdctlHeader struct {
	ClusterID uint64 `json:"cluster_id"`
	MemberID  uint64 `json:"member_id"`
	Revision  int64  `json:"revision"`
	RaftTerm  uint64 `json:"raft_term"`
}

// etcdctlKV mirrors a key-value in etcdctl's JSON; keys and values are
// base64, which encoding/json decodes into []byte.
type etcdctlKV struct {
	Key            []byte `json:"key"`
	CreateRevision int64  `json:"create_revision"`
	ModRevision    int64  `json:"mod_revision"`
	Version        int64  `json:"version"`
	Value          []byte `json:"value"`
	Lease          int64  `json:"lease"`
}

type etcdctlGet struct {
	Header etcdctlHeader `json:"header"`
	Kvs    []etcdctlKV   `json:"kvs"`
	More   bool          `json:"more"`
	Count  int64         `json:"count"`
}

type etcdctlEndpointStatus struct {
	Endpoint string `json:"Endpoint"`
	Status   struct {
		Header           etcdctlHeader `json:"header"`
		Version          string        `json:"version"`
		DBSize           int64         `json:"dbSize"`
		Leader           uint64        `json:"leader"`
		RaftIndex        uint64        `json:"raftIndex"`
		RaftTerm         uint64        `json:"raftTerm"`
		RaftAppliedIndex uint64        `json:"raftAppliedIndex"`
	} `json:"Status"`
}

type etcdctlMemberList struct {
	Header  etcdctlHeader `json:"header"`
	Members []struct {
		ID         uint64   `json:"ID"`
		Name       string   `json:"name"`
		PeerURLs   []string `json:"peerURLs"`
		ClientURLs []string `json:"clientURLs"`
		IsLearner  bool     `json:"isLearner"`
	} `json:"members"`
}

// etcdctlRunner runs etcdctl and fails the test on anything but exit code 0.
type etcdctlRunner struct {
	t   *testing.T
	ctx context.Context
	cli *framework.Etcdctl
}

func (r etcdctlRunner) ok(stdin string, args ...string) string {
	r.t.Helper()
	res, err := r.cli.RunWithStdin(r.ctx, stdin, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	if res.ExitCode != 0 {
		r.t.Fatalf("etcdctl %s: exit code %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

func (r etcdctlRunner) expect(want string, args ...string) {
	r.t.Helper()
	if got := r.ok("", args...); got != want {
		r.t.Fatalf("etcdctl %s printed %q, want %q", strings.Join(args, " "), got, want)
	}
}

func (r etcdctlRunner) json(out any, args ...string) {
	r.t.Helper()
	stdout := r.ok("", append(args, "-w", "json")...)
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		r.t.Fatalf("etcdctl %s -w json: %v\noutput: %s", strings.Join(args, " "), err, stdout)
	}
}

func TestEtcdctl(t *testing.T) {
	t.Parallel()
	s := startServer(t, framework.ClusterConfig{})
	ctx := testContext(t, testTimeout)
	ctl := etcdctlRunner{t: t, ctx: ctx, cli: s.cluster.Etcdctl()}
	member := s.member()

	ctl.expect("OK\n", "put", "foo", "bar")   // rev 2
	ctl.expect("OK\n", "put", "foo/1", "one") // rev 3
	ctl.expect("OK\n", "put", "foo", "bar2")  // rev 4
	ctl.expect("OK\n", "put", "other", "o")   // rev 5
	ctl.expect("foo\nbar2\n", "get", "foo")
	ctl.expect("bar2\none\n", "get", "foo", "--prefix", "--print-value-only")
	ctl.expect("", "get", "missing")

	var get etcdctlGet
	ctl.json(&get, "get", "foo", "--prefix")
	if get.Header.Revision != 5 || get.Header.ClusterID == 0 || get.Header.MemberID == 0 || get.Header.RaftTerm == 0 {
		t.Fatalf("get -w json header: %+v", get.Header)
	}
	if get.Count != 2 || get.More || len(get.Kvs) != 2 {
		t.Fatalf("get -w json: count=%d more=%v kvs=%d, want 2, false, 2", get.Count, get.More, len(get.Kvs))
	}
	wantKVs := []etcdctlKV{
		{Key: []byte("foo"), Value: []byte("bar2"), CreateRevision: 2, ModRevision: 4, Version: 2},
		{Key: []byte("foo/1"), Value: []byte("one"), CreateRevision: 3, ModRevision: 3, Version: 1},
	}
	for i, want := range wantKVs {
		got := get.Kvs[i]
		if string(got.Key) != string(want.Key) || string(got.Value) != string(want.Value) ||
			got.CreateRevision != want.CreateRevision || got.ModRevision != want.ModRevision ||
			got.Version != want.Version || got.Lease != 0 {
			t.Fatalf("get -w json kv %d: %+v, want %+v", i, got, want)
		}
	}
	var limited etcdctlGet
	ctl.json(&limited, "get", "foo", "--prefix", "--limit=1")
	if len(limited.Kvs) != 1 || !limited.More || limited.Count != 2 {
		t.Fatalf("get --limit=1 -w json: kvs=%d more=%v count=%d, want 1, true, 2", len(limited.Kvs), limited.More, limited.Count)
	}

	// Interactive txn: compares, blank line, success ops, blank line,
	// failure ops, blank line. etcdctl prints its prompts to stdout.
	const prompts = "compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\n"
	got := ctl.ok("value(\"foo\") = \"bar2\"\n\nput t1 v1\nget foo\n\nput t2 v2\n\n", "txn", "-i")
	if want := prompts + "SUCCESS\n\nOK\n\nfoo\nbar2\n"; got != want {
		t.Fatalf("txn -i (success) printed %q, want %q", got, want)
	}
	got = ctl.ok("mod(\"foo\") > \"100\"\n\nput t1 never\n\nput t2 v2\n\n", "txn", "-i")
	if want := prompts + "FAILURE\n\nOK\n"; got != want {
		t.Fatalf("txn -i (failure) printed %q, want %q", got, want)
	}
	ctl.expect("t1\nv1\nt2\nv2\n", "get", "t", "--prefix") // revs 6 and 7

	ctl.expect("1\n", "del", "t1") // rev 8
	ctl.expect("0\n", "del", "t1")
	ctl.expect("2\n", "del", "foo", "--prefix") // rev 9
	ctl.expect("compacted revision 8\n", "compaction", "8")

	res, err := ctl.cli.Run(ctx, "compaction", "8")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Error: etcdserver: mvcc: required revision has been compacted") {
		t.Fatalf("second compaction: exit code %d, stderr %q; want a failure naming the compacted revision", res.ExitCode, res.Stderr)
	}
	res, err = ctl.cli.Run(ctx, "get", "other", "--rev=7")
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "etcdserver: mvcc: required revision has been compacted") {
		t.Fatalf("get at compacted revision: exit code %d, stderr %q", res.ExitCode, res.Stderr)
	}
	ctl.expect("other\no\n", "get", "other", "--rev=8")

	var statuses []etcdctlEndpointStatus
	ctl.json(&statuses, "endpoint", "status")
	if len(statuses) != 1 {
		t.Fatalf("endpoint status: %d entries, want 1", len(statuses))
	}
	st := statuses[0]
	if st.Endpoint != member.Endpoint() || !etcdVersion.MatchString(st.Status.Version) ||
		st.Status.Leader != st.Status.Header.MemberID || st.Status.Header.Revision != 9 ||
		st.Status.RaftIndex == 0 || st.Status.RaftTerm == 0 || st.Status.RaftAppliedIndex == 0 || st.Status.DBSize <= 0 {
		t.Fatalf("endpoint status -w json: %+v", st)
	}

	health := ctl.ok("", "endpoint", "health")
	healthLine := regexp.MustCompile(`^` + regexp.QuoteMeta(member.Endpoint()) + ` is healthy: successfully committed proposal: took = [0-9.]+[µnm]?s\n$`)
	if !healthLine.MatchString(health) {
		t.Fatalf("endpoint health printed %q", health)
	}
	var healths []struct {
		Endpoint string `json:"endpoint"`
		Health   bool   `json:"health"`
		Error    string `json:"error"`
	}
	ctl.json(&healths, "endpoint", "health")
	if len(healths) != 1 || !healths[0].Health || healths[0].Endpoint != member.Endpoint() || healths[0].Error != "" {
		t.Fatalf("endpoint health -w json: %+v", healths)
	}

	var members etcdctlMemberList
	ctl.json(&members, "member", "list")
	if len(members.Members) != 1 {
		t.Fatalf("member list -w json: %+v", members)
	}
	m := members.Members[0]
	if m.ID != members.Header.MemberID || m.Name != member.Name() || m.IsLearner ||
		!equalStrings(m.PeerURLs, []string{member.PeerURL()}) || !equalStrings(m.ClientURLs, []string{member.ClientURL()}) {
		t.Fatalf("member list -w json: %+v", m)
	}
	ctl.expect(fmt.Sprintf("%x, started, %s, %s, %s, false\n", m.ID, member.Name(), member.PeerURL(), member.ClientURL()), "member", "list")
}
