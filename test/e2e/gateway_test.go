package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// TestGatewayStart runs `gateway start` (etcd's L4 gateway) in front of a
// member: stock etcdctl puts and gets through it, as etcd's own
// TestGateway does. A second gateway lists a dead endpoint first (with a
// scheme, and its flags before "start", as etcd's test writes them): the
// first connection marks it inactive and is served by the live one, and
// so is every request after it.
func TestGatewayStart(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	p := freePorts(t, 5)
	client := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	gw1 := fmt.Sprintf("127.0.0.1:%d", p[2])
	gw2 := fmt.Sprintf("127.0.0.1:%d", p[3])
	dead := fmt.Sprintf("127.0.0.1:%d", p[4]) // reserved, nothing listens
	m := startRaw(t, dir, memberFlags(dir, "m1", p[0], p[1]))
	m.waitReady(ctx, client)

	g1 := startRaw(t, t.TempDir(), []string{"gateway", "start", "--endpoints=" + strings.TrimPrefix(client, "http://"), "--listen-addr=" + gw1})
	waitLogLine(ctx, g1, "ready to proxy client requests", map[string]string{"endpoints": `["` + strings.TrimPrefix(client, "http://") + `"]`})
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctl := etcdctlRunner{t: t, ctx: ctx, cli: framework.NewEtcdctl(framework.EtcdctlPath(root), []string{gw1})}
	ctl.expect("OK\n", "put", "foo", "bar")
	ctl.expect("foo\nbar\n", "get", "foo")

	g2 := startRaw(t, t.TempDir(), []string{"gateway", "--endpoints=http://" + dead + "," + client, "start", "--listen-addr=" + gw2, "--retry-delay=1h"})
	waitLogLine(ctx, g2, "ready to proxy client requests", nil)
	ctl2 := etcdctlRunner{t: t, ctx: ctx, cli: framework.NewEtcdctl(framework.EtcdctlPath(root), []string{gw2})}
	for i := range 3 {
		v := fmt.Sprintf("v%d", i)
		ctl2.expect("OK\n", "put", "foo", v)
		ctl2.expect("foo\n"+v+"\n", "get", "foo")
	}
	waitLogLine(ctx, g2, "deactivated endpoint", map[string]string{"address": `"` + dead + `"`, "interval": `"1h0m0s"`})
	if n := countLogLines(g2, "deactivated endpoint"); n != 1 {
		t.Errorf("%d \"deactivated endpoint\" lines, want 1: the dead endpoint stays out for --retry-delay", n)
	}
}

// waitLogLine waits for a JSON log line of p with message msg whose
// fields, JSON-encoded, equal fields.
func waitLogLine(ctx context.Context, p *rawMember, msg string, fields map[string]string) {
	p.t.Helper()
	p.pollUntil(ctx, func(context.Context) error {
		for _, line := range p.logLines() {
			if logLineMatches(line, msg, fields) {
				return nil
			}
		}
		return fmt.Errorf("no %q line with %v logged", msg, fields)
	})
}

func countLogLines(p *rawMember, msg string) int { return countMatching(p, msg, nil) }

// countMatching counts p's log lines with message msg whose fields hold
// the raw JSON values of fields.
func countMatching(p *rawMember, msg string, fields map[string]string) int {
	n := 0
	for _, line := range p.logLines() {
		if logLineMatches(line, msg, fields) {
			n++
		}
	}
	return n
}

func logLineMatches(line, msg string, fields map[string]string) bool {
	var entry map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &entry) != nil {
		return false
	}
	var m string
	if json.Unmarshal(entry["msg"], &m) != nil || m != msg {
		return false
	}
	for k, want := range fields {
		if string(entry[k]) != want {
			return false
		}
	}
	return true
}
