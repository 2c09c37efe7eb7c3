package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/test/framework"
)

// TestKubeadmCommandLine starts the target with kubeadm's static-pod etcd
// command line, unchanged (mutual TLS on the client and peer URLs, plain
// HTTP metrics), in its 3.5-era spelling and the 3.6 one, and checks
// kubeadm's probes on the metrics URL: /health?exclude=NOSPACE&serializable=true,
// /livez, /readyz; then a TLS client with a client certificate writes.
func TestKubeadmCommandLine(t *testing.T) {
	for name, extra := range map[string][]string{
		"experimental":  {"--experimental-initial-corrupt-check=true", "--experimental-watch-progress-notify-interval=5s"},
		"feature-gates": {"--feature-gates=InitialCorruptCheck=true", "--watch-progress-notify-interval=5s"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t, testTimeout)
			dir := t.TempDir()
			pki, err := framework.NewPKI(dir)
			if err != nil {
				t.Fatal(err)
			}
			p := freePorts(t, 3)
			client := fmt.Sprintf("https://127.0.0.1:%d", p[0])
			peer := fmt.Sprintf("https://127.0.0.1:%d", p[1])
			metrics := fmt.Sprintf("http://127.0.0.1:%d", p[2])
			args := append([]string{
				"--advertise-client-urls=" + client,
				"--cert-file=" + pki.Member.CertFile,
				"--client-cert-auth=true",
				"--data-dir=" + filepath.Join(dir, "etcd"),
				"--initial-advertise-peer-urls=" + peer,
				"--initial-cluster=node1=" + peer,
				"--key-file=" + pki.Member.KeyFile,
				"--listen-client-urls=https://127.0.0.1:" + fmt.Sprint(p[0]),
				"--listen-metrics-urls=" + metrics,
				"--listen-peer-urls=" + peer,
				"--name=node1",
				"--peer-cert-file=" + pki.Member.CertFile,
				"--peer-client-cert-auth=true",
				"--peer-key-file=" + pki.Member.KeyFile,
				"--peer-trusted-ca-file=" + pki.CA.CertFile,
				"--snapshot-count=10000",
				"--trusted-ca-file=" + pki.CA.CertFile,
			}, extra...)
			m := startRaw(t, dir, args)
			m.waitHTTP(ctx, metrics+"/readyz")
			for _, probe := range []struct{ path, body string }{
				{"/health?exclude=NOSPACE&serializable=true", `{"health":"true","reason":""}`},
				{"/livez", "ok"},
				{"/readyz", "ok"},
			} {
				code, body, err := httpGet(ctx, metrics+probe.path)
				if err != nil || code != http.StatusOK || strings.TrimSpace(body) != probe.body {
					t.Errorf("GET %s: %d %q %v, want 200 %q", probe.path, code, body, err, probe.body)
				}
			}
			code, body, err := httpGet(ctx, metrics+"/metrics")
			if err != nil || code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
				t.Errorf("GET /metrics: %d %v, want 200 with the Go collector", code, err)
			}
			// The metrics listener serves the probes and metrics only.
			if code, _, err := httpGet(ctx, metrics+"/version"); err != nil || code != http.StatusNotFound {
				t.Errorf("GET /version on the metrics URL: %d %v, want 404", code, err)
			}
			tlsCfg, err := framework.ClientTLSConfig(pki.CA.CertFile, pki.Client)
			if err != nil {
				t.Fatal(err)
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, TLS: tlsCfg, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			if _, err := cli.Put(ctx, "k", "v"); err != nil {
				t.Fatalf("put over mutual TLS: %v", err)
			}
		})
	}
}

func newTestClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	return newTestClientTLS(t, endpoint, nil)
}

// newTestClientTLS is newTestClient over TLS (tc nil: plaintext).
func newTestClientTLS(t *testing.T, endpoint string, tc *tls.Config) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, TLS: tc, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestUnixSocketListener serves clients on a unix:// URL beside TCP, as
// etcd does (the socket is host+path of the URL), and talks to it with
// clientv3.
func TestUnixSocketListener(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir, err := os.MkdirTemp("", "uds") // short: socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := freePorts(t, 2)
	args := memberFlags(dir, "m1", p[0], p[1])
	sock := filepath.Join(dir, "client.sock")
	args[2] += ",unix://" + sock
	m := startRaw(t, dir, args)
	m.waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d", p[0]))
	cli := newTestClient(t, "unix://"+sock)
	if _, err := cli.Put(ctx, "over-unix", "yes"); err != nil {
		t.Fatalf("put over %s: %v", sock, err)
	}
	resp, err := cli.Get(ctx, "over-unix")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "yes" {
		t.Fatalf("get over unix socket: %v %v", resp, err)
	}
}

// TestClientHTTPURLs checks --listen-client-http-urls: the JSON gateway and
// /health move to that listener, which serves no gRPC, and the client URL
// serves gRPC only.
func TestClientHTTPURLs(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	p := freePorts(t, 3)
	httpURL := fmt.Sprintf("http://127.0.0.1:%d", p[2])
	args := append(memberFlags(dir, "m1", p[0], p[1]), "--listen-client-http-urls="+httpURL)
	m := startRaw(t, dir, args)
	client := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	m.waitReady(ctx, client)
	m.waitHTTP(ctx, httpURL+"/health")

	if _, err := newTestClient(t, client).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("gRPC on --listen-client-urls: %v", err)
	}
	code, body, err := postJSON(ctx, httpURL+"/v3/kv/range", `{"key":"aw=="}`)
	if err != nil || code != http.StatusOK || !strings.Contains(body, `"count":"1"`) {
		t.Errorf("gateway range on the HTTP URL: %d %s %v", code, body, err)
	}
	if _, _, err := httpGet(ctx, client+"/health"); err == nil {
		t.Errorf("HTTP on the gRPC-only client URL was answered, want the connection refused")
	}
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := newTestClient(t, httpURL).Get(gctx, "k"); err == nil {
		t.Errorf("gRPC on the HTTP-only URL succeeded")
	}
}

func postJSON(ctx context.Context, url, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	return doHTTP(req)
}

// TestGatewaySwitchCORSAndHostWhitelist checks --enable-grpc-gateway=false
// (no /v3/ routes), --cors (the Origin echoed when listed) and
// --host-whitelist (other Host headers refused with 421).
func TestGatewaySwitchCORSAndHostWhitelist(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	p := freePorts(t, 2)
	args := append(memberFlags(dir, "m1", p[0], p[1]),
		"--enable-grpc-gateway=false", "--cors=http://allowed.example:8080", "--host-whitelist=127.0.0.1")
	m := startRaw(t, dir, args)
	client := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	m.waitReady(ctx, client)

	if code, _, err := postJSON(ctx, client+"/v3/kv/range", `{"key":"aw=="}`); err != nil || code != http.StatusNotFound {
		t.Errorf("gateway with --enable-grpc-gateway=false: %d %v, want 404", code, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, client+"/version", nil)
	req.Header.Set("Origin", "http://allowed.example:8080")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://allowed.example:8080" {
		t.Errorf("Access-Control-Allow-Origin = %q, want the listed origin", got)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, client+"/version", nil)
	req.Host = "evil.example"
	code, body, err := doHTTP(req)
	if err != nil || code != http.StatusMisdirectedRequest || !strings.Contains(body, "DNS Rebinding") {
		t.Errorf("request with Host evil.example: %d %v, want 421 naming DNS rebinding", code, err)
	}
}

// etcdTimestamp is etcd's "ts": local time with microseconds and a
// numeric offset or Z.
var etcdTimestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d{4})$`)

// TestLogFormatAsEtcd starts the target logging to a file
// (--log-outputs) in JSON and checks every line has etcd's fields; then
// --log-format=console.
func TestLogFormatAsEtcd(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	p := freePorts(t, 2)
	logFile := filepath.Join(dir, "member.log")
	args := append(memberFlags(dir, "m1", p[0], p[1]), "--log-outputs="+logFile, "--log-format=json", "--log-level=info")
	m := startRaw(t, dir, args)
	m.waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d", p[0]))
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 3 {
		t.Fatalf("log file has %d lines, want the start-up lines", len(lines))
	}
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		level, _ := entry["level"].(string)
		ts, _ := entry["ts"].(string)
		caller, _ := entry["caller"].(string)
		msg, _ := entry["msg"].(string)
		if !regexp.MustCompile(`^(debug|info|warn|error)$`).MatchString(level) || !etcdTimestamp.MatchString(ts) ||
			!regexp.MustCompile(`^[\w.@/-]+\.go:\d+$`).MatchString(caller) || msg == "" {
			t.Errorf("line lacks etcd's level/ts/caller/msg: %s", line)
		}
	}

	dir2 := t.TempDir()
	p2 := freePorts(t, 2)
	m2 := startRaw(t, dir2, append(memberFlags(dir2, "m2", p2[0], p2[1]), "--log-format=console", "--log-outputs=stdout"))
	m2.waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d", p2[0]))
	console := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d{4})\t(debug|info|warn|error)\t([\w.-]+\t)?\S+\.go:\d+\t`)
	for _, line := range m2.logLines() {
		if strings.HasPrefix(line, "{") {
			t.Errorf("JSON line with --log-format=console: %s", line)
			continue
		}
		if line != "" && !console.MatchString(line) && !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "go") {
			t.Errorf("console line not in zap's console shape: %q", line)
		}
	}
}

// TestConfigFile starts the target from an etcd YAML configuration file
// and checks the file wins over the command line and ETCD_* variables,
// as etcd documents.
func TestConfigFile(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	p := freePorts(t, 3)
	c := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", p[1])
	metrics := fmt.Sprintf("http://127.0.0.1:%d", p[2])
	cfg := fmt.Sprintf(`# etcd's sample etcd.conf.yml, trimmed
name: 'from-file'
data-dir: %s
snapshot-count: 10000
heartbeat-interval: 100
election-timeout: 1000
quota-backend-bytes: 0
listen-peer-urls: %s
listen-client-urls: %s
listen-metrics-urls: %s
max-snapshots: 5
max-wals: 5
cors:
initial-advertise-peer-urls: %s
advertise-client-urls: %s
discovery:
discovery-fallback: 'exit'
discovery-proxy:
discovery-srv:
initial-cluster: from-file=%s
initial-cluster-token: 'etcd-cluster'
initial-cluster-state: 'new'
strict-reconfig-check: false
enable-pprof: true
proxy: 'off'
client-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
  auto-tls: false
peer-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
  auto-tls: false
self-signed-cert-validity: 1
log-level: info
logger: zap
log-outputs: [stderr]
force-new-cluster: false
watch-progress-notify-interval: 5000000000
feature-gates: InitialCorruptCheck=true
`, filepath.Join(dir, "data"), peer, c, metrics, peer, c, peer)
	path := filepath.Join(dir, "etcd.conf.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Flags and variables that would break the start if read.
	m := startRaw(t, dir, []string{"--config-file=" + path, "--name=from-flag", "--listen-client-urls=http://127.0.0.1:1"},
		"ETCD_NAME=from-env", "ETCD_LISTEN_PEER_URLS=http://127.0.0.1:1")
	m.waitReady(ctx, c)
	m.waitHTTP(ctx, metrics+"/health")
	members, err := newTestClient(t, c).MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members.Members) != 1 || members.Members[0].Name != "from-file" {
		t.Fatalf("members %v, want the one named by the file", members.Members)
	}
	if !strings.Contains(strings.Join(m.logLines(), "\n"), "loaded server configuration, other configuration command line flags and environment variables will be ignored if provided") {
		t.Errorf("log does not say the file replaces flags and variables")
	}
}

// TestReadyToServeLogLines checks the start-up lines that operators'
// scripts and etcd's own test framework wait for: once per client
// listener, "ready to serve client requests", then "serving client
// traffic insecurely; ..." with the listener's traffic (grpc, http or
// grpc+http) and address, as etcd's embed package logs them.
func TestReadyToServeLogLines(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	p := freePorts(t, 5)
	both := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	grpcOnly := fmt.Sprintf("http://127.0.0.1:%d", p[2])
	httpOnly := fmt.Sprintf("http://127.0.0.1:%d", p[4])
	// The first member serves gRPC and HTTP on one URL; the second splits
	// them with --listen-client-http-urls.
	m := startRaw(t, dir, memberFlags(dir, "m1", p[0], p[1]))
	m.waitReady(ctx, both)
	wantServing(ctx, t, m, map[string]string{both: "grpc+http"})

	dir2 := t.TempDir()
	args := append(memberFlags(dir2, "m2", p[2], p[3]), "--listen-client-http-urls="+httpOnly)
	m2 := startRaw(t, dir2, args)
	m2.waitReady(ctx, grpcOnly)
	wantServing(ctx, t, m2, map[string]string{grpcOnly: "grpc", httpOnly: "http"})
}

// wantServing waits until m's log has one "ready to serve client
// requests" line per listener in want (URL -> traffic) and, for each, the
// "serving client traffic" line naming its address and traffic.
func wantServing(ctx context.Context, t *testing.T, m *rawMember, want map[string]string) {
	t.Helper()
	m.pollUntil(ctx, func(context.Context) error {
		ready, serving := 0, map[string]string{}
		for _, line := range m.logLines() {
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) != nil {
				continue
			}
			switch msg, _ := entry["msg"].(string); {
			case msg == "ready to serve client requests":
				ready++
			case strings.HasPrefix(msg, "serving client traffic insecurely"):
				addr, _ := entry["address"].(string)
				traffic, _ := entry["traffic"].(string)
				serving["http://"+addr] = traffic
			}
		}
		if ready != len(want) {
			return fmt.Errorf("%d \"ready to serve client requests\" lines, want %d", ready, len(want))
		}
		for url, traffic := range want {
			if serving[url] != traffic {
				return fmt.Errorf("listener %s logged traffic %q, want %q (all: %v)", url, serving[url], traffic, serving)
			}
		}
		return nil
	})
}

// TestStartingServerLogLine checks etcd's "starting an etcd server" line,
// which tools read the effective configuration from (etcd's own test
// framework looks for "snapshot-catchup-entries" in it): the fields carry
// the flags' values, the deprecated spelling's included, in etcd's JSON
// types; a restart says the member was initialized and logs no initial
// cluster. With
// --experimental-bootstrap-defrag-threshold-megabytes set and a data dir
// far below it, both servers log "Skipping defragmentation".
func TestStartingServerLogLine(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	p := freePorts(t, 2)
	client := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", p[1])
	args := append(memberFlags(dir, "m1", p[0], p[1]),
		"--experimental-snapshot-catchup-entries=1000", "--snapshot-count=777",
		"--experimental-bootstrap-defrag-threshold-megabytes=1000", "--v2-deprecation=gone")
	want := map[string]string{
		"name":                        `"m1"`,
		"snapshot-catchup-entries":    "1000",
		"snapshot-count":              "777",
		"listen-client-urls":          `["` + client + `"]`,
		"initial-advertise-peer-urls": `["` + peer + `"]`,
		"initial-cluster":             `"m1=` + peer + `"`,
		"initial-cluster-state":       `"new"`,
		"heartbeat-interval":          `"100ms"`,
		"election-timeout":            `"1s"`,
		"quota-backend-bytes":         "2147483648",
		"v2-deprecation":              `"write-only"`, // etcd 3.6 enforces its default
	}
	for _, initialized := range []string{"false", "true"} {
		m := startRaw(t, dir, args)
		m.waitReady(ctx, client)
		want["member-initialized"] = initialized
		if initialized == "true" {
			// The restarted member's cluster comes from its log.
			want["initial-cluster"] = `""`
		}
		if n := countMatching(m, "starting an etcd server", want); n != 1 {
			t.Errorf("member-initialized=%s: %d \"starting an etcd server\" lines with %v, want 1; log:\n%s",
				initialized, n, want, strings.Join(m.logLines(), "\n"))
		}
		if n := countLogLines(m, "Skipping defragmentation"); n != 1 {
			t.Errorf("%d \"Skipping defragmentation\" lines, want 1", n)
		}
		if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		m.waitExit(ctx)
	}
}

// TestCompactionLogLine: a finished compaction is logged in etcd's words,
// "finished scheduled compaction" with the compaction revision, which
// operators' alerts and etcd's own e2e tests wait for.
func TestCompactionLogLine(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	p := freePorts(t, 2)
	client := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	m := startRaw(t, dir, memberFlags(dir, "m1", p[0], p[1]))
	m.waitReady(ctx, client)
	cli := newTestClient(t, client)
	var rev int64
	for i := 0; i < 3; i++ {
		resp, err := cli.Put(ctx, "k", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"compact-revision": fmt.Sprint(rev)}
	m.pollUntil(ctx, func(context.Context) error {
		if countMatching(m, "finished scheduled compaction", want) != 1 {
			return fmt.Errorf("no \"finished scheduled compaction\" line with compact-revision %d", rev)
		}
		return nil
	})
}
