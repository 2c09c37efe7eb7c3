package linearizability

import (
	"strings"
	"testing"
)

func TestLogDigest(t *testing.T) {
	log := strings.Join([]string{
		`=== e2e: run #2 of member m0`,
		`{"level":"info","msg":"starting"}`,
		`{"level":"warn","msg":"failed to publish local member to cluster through raft","error":"etcdserver: too many requests"}`,
		`{"level":"WARN","msg":"truncating torn WAL tail","file":"x.wal"}`,
		`{"level":"warn","msg":"failed to publish local member to cluster through raft","error":"etcdserver: too many requests"}`,
		`not json`,
	}, "\n")
	got := logDigest(log)
	want := "  2x warn failed to publish local member to cluster through raft: etcdserver: too many requests\n" +
		"  1x WARN truncating torn WAL tail\n"
	if got != want {
		t.Fatalf("logDigest =\n%s\nwant\n%s", got, want)
	}
}
