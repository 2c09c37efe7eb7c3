package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// flagCase is one flag of `etcd --help` (3.6.16) with a valid value.
type flagCase struct {
	name  string
	value string // {dir} is the process's directory, {port} a free port
	// owner is the area that implements the flag: "cli" here, otherwise
	// the helper area that owns it (a flag it has not registered yet is
	// reported, not failed).
	owner string
	// batch is the process the flag is started in: 1 for current names, 2
	// for the deprecated --experimental-* spellings (etcd refuses an old
	// and a new spelling together); 0 for the flags every process is
	// started with (memberFlags); 3 for a flag that cannot be given
	// alongside --initial-cluster, checked by TestFlagErrorsAsEtcd.
	batch int
}

// etcdFlagCases are all 136 flags `etcd --help` lists.
var etcdFlagCases = []flagCase{
	// Member: the flags every start has.
	{"name", "", "cli", 0}, {"data-dir", "", "cli", 0}, {"listen-peer-urls", "", "cli", 0},
	{"listen-client-urls", "", "cli", 0}, {"initial-advertise-peer-urls", "", "cli", 0},
	{"initial-cluster", "", "cli", 0}, {"advertise-client-urls", "", "cli", 0},

	{"wal-dir", "{dir}/wal", "quota", 1},
	{"snapshot-count", "10000", "cli", 1},
	{"heartbeat-interval", "100", "cli", 1},
	{"election-timeout", "1000", "cli", 1},
	{"initial-election-tick-advance", "true", "cli", 1},
	{"listen-client-http-urls", "http://127.0.0.1:{port}", "cli", 1},
	{"max-snapshots", "5", "quota", 1},
	{"max-wals", "5", "quota", 1},
	{"memory-mlock", "false", "cli", 1},
	{"quota-backend-bytes", "4294967296", "quota", 1},
	{"backend-bbolt-freelist-type", "array", "cli", 1},
	{"backend-batch-interval", "100ms", "cli", 1},
	{"backend-batch-limit", "10000", "cli", 1},
	{"max-txn-ops", "128", "cli", 1},
	{"max-request-bytes", "1572864", "cli", 1},
	{"max-concurrent-streams", "1000", "cli", 1},
	{"grpc-keepalive-min-time", "5s", "cli", 1},
	{"grpc-keepalive-interval", "2h", "cli", 1},
	{"grpc-keepalive-timeout", "20s", "cli", 1},
	{"socket-reuse-port", "true", "cli", 1},
	{"socket-reuse-address", "true", "cli", 1},
	{"enable-grpc-gateway", "true", "cli", 1},
	{"raft-read-timeout", "5s", "cli", 1},
	{"raft-write-timeout", "5s", "cli", 1},
	{"feature-gates", "InitialCorruptCheck=true,CompactHashCheck=true,LeaseCheckpoint=true,LeaseCheckpointPersist=true,StopGRPCServiceOnDefrag=false,TxnModeWriteWithSharedBuffer=true,SetMemberLocalAddr=false", "cli", 1},

	// Clustering.
	{"initial-cluster-state", "new", "cli", 1},
	{"initial-cluster-token", "flags-e2e", "cli", 1},
	// Discovery flags that would make the member bootstrap through
	// discovery instead of --initial-cluster get their empty default.
	{"discovery", "", "cli", 1},
	{"discovery-token", "", "cli", 1},
	{"discovery-endpoints", "", "cli", 3},
	{"discovery-dial-timeout", "2s", "cli", 1},
	{"discovery-request-timeout", "5s", "cli", 1},
	{"discovery-keepalive-time", "2s", "cli", 1},
	{"discovery-keepalive-timeout", "6s", "cli", 1},
	{"discovery-insecure-transport", "true", "cli", 1},
	{"discovery-insecure-skip-tls-verify", "false", "cli", 1},
	{"discovery-cert", "", "cli", 1},
	{"discovery-key", "", "cli", 1},
	{"discovery-cacert", "", "cli", 1},
	{"discovery-user", "", "cli", 1},
	{"discovery-password", "", "cli", 1},
	{"discovery-fallback", "exit", "cli", 1},
	{"discovery-proxy", "", "cli", 1},
	{"discovery-srv", "", "cli", 1},
	{"discovery-srv-name", "suffix", "cli", 1},
	{"strict-reconfig-check", "true", "cli", 1},
	{"pre-vote", "true", "cli", 1},
	{"auto-compaction-retention", "1h", "quota", 1},
	{"auto-compaction-mode", "periodic", "quota", 1},
	{"v2-deprecation", "write-only", "cli", 1},

	// Security: plain-HTTP values (the TLS tests start TLS members).
	{"cert-file", "", "tls", 1},
	{"key-file", "", "tls", 1},
	{"client-cert-auth", "false", "tls", 1},
	{"client-cert-file", "", "tls", 1},
	{"client-key-file", "", "tls", 1},
	{"client-crl-file", "", "tls", 1},
	{"client-cert-allowed-hostname", "", "tls", 1},
	{"trusted-ca-file", "", "tls", 1},
	{"auto-tls", "false", "tls", 1},
	{"peer-cert-file", "", "tls", 1},
	{"peer-key-file", "", "tls", 1},
	{"peer-client-cert-auth", "false", "tls", 1},
	{"peer-client-cert-file", "", "tls", 1},
	{"peer-client-key-file", "", "tls", 1},
	{"peer-trusted-ca-file", "", "tls", 1},
	{"peer-cert-allowed-cn", "", "tls", 1},
	{"peer-cert-allowed-hostname", "", "tls", 1},
	{"peer-auto-tls", "false", "tls", 1},
	{"self-signed-cert-validity", "1", "tls", 1},
	{"peer-crl-file", "", "tls", 1},
	{"cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "tls", 2},
	{"cors", "http://example.com:8080", "cli", 1},
	{"host-whitelist", "127.0.0.1,localhost", "cli", 1},
	{"tls-min-version", "TLS1.2", "tls", 1},
	{"tls-max-version", "TLS1.3", "tls", 1},

	// Auth.
	{"auth-token", "simple", "auth", 1},
	{"bcrypt-cost", "10", "auth", 1},
	{"auth-token-ttl", "300", "auth", 1},

	// Profiling and monitoring.
	{"enable-pprof", "true", "cli", 1},
	{"metrics", "extensive", "metrics", 1},
	{"listen-metrics-urls", "http://127.0.0.1:{port}", "cli", 1},

	// Logging.
	{"logger", "zap", "cli", 1},
	{"log-outputs", "stderr", "cli", 1},
	{"log-level", "info", "cli", 1},
	{"log-format", "json", "cli", 1},
	{"enable-log-rotation", "false", "cli", 1},
	{"log-rotation-config-json", `{"maxsize": 100, "maxage": 0, "maxbackups": 0, "localtime": false, "compress": false}`, "cli", 1},
	{"warning-unary-request-duration", "300ms", "cli", 1},

	// Distributed tracing.
	{"experimental-enable-distributed-tracing", "false", "cli", 2},
	{"enable-distributed-tracing", "false", "cli", 1},
	{"experimental-distributed-tracing-address", "localhost:4317", "cli", 2},
	{"distributed-tracing-address", "localhost:4317", "cli", 1},
	{"experimental-distributed-tracing-service-name", "etcd", "cli", 2},
	{"distributed-tracing-service-name", "etcd", "cli", 1},
	{"experimental-distributed-tracing-instance-id", "m1", "cli", 2},
	{"distributed-tracing-instance-id", "m1", "cli", 1},
	{"experimental-distributed-tracing-sampling-rate", "0", "cli", 2},
	{"distributed-tracing-sampling-rate", "0", "cli", 1},

	// Experimental features and their 3.6 names.
	{"experimental-initial-corrupt-check", "true", "cli", 2},
	{"experimental-corrupt-check-time", "5m", "quota", 2},
	{"corrupt-check-time", "5m", "quota", 1},
	{"experimental-compact-hash-check-enabled", "true", "cli", 2},
	{"experimental-compact-hash-check-time", "1m", "quota", 2},
	{"compact-hash-check-time", "1m", "quota", 1},
	{"experimental-enable-lease-checkpoint", "true", "cli", 2},
	{"experimental-compaction-batch-limit", "1000", "cli", 2},
	{"compaction-batch-limit", "1000", "cli", 1},
	{"experimental-peer-skip-client-san-verification", "false", "tls", 2},
	{"peer-skip-client-san-verification", "false", "tls", 1},
	{"experimental-watch-progress-notify-interval", "5s", "cli", 2},
	{"watch-progress-notify-interval", "5s", "cli", 1},
	{"experimental-warning-apply-duration", "100ms", "cli", 2},
	{"warning-apply-duration", "100ms", "cli", 1},
	{"experimental-txn-mode-write-with-shared-buffer", "true", "cli", 2},
	{"experimental-bootstrap-defrag-threshold-megabytes", "100", "cli", 2},
	{"bootstrap-defrag-threshold-megabytes", "100", "cli", 1},
	{"experimental-warning-unary-request-duration", "300ms", "cli", 2},
	{"max-learners", "1", "cli", 1},
	{"experimental-compaction-sleep-interval", "10ms", "cli", 2},
	{"compaction-sleep-interval", "10ms", "cli", 1},
	{"experimental-downgrade-check-time", "5s", "cli", 2},
	{"downgrade-check-time", "5s", "cli", 1},
	{"experimental-enable-lease-checkpoint-persist", "true", "cli", 2},
	{"experimental-memory-mlock", "false", "cli", 2},
	{"experimental-snapshot-catchup-entries", "5000", "cli", 2},
	{"snapshot-catchup-entries", "5000", "cli", 1},
	{"experimental-stop-grpc-service-on-defrag", "false", "cli", 2},

	// Unsafe.
	{"force-new-cluster", "false", "quota", 1},
	{"unsafe-no-fsync", "true", "quota", 1},
}

// helpFlags are the long flags a binary's --help lists.
func helpFlags(t *testing.T, binary string) map[string]bool {
	t.Helper()
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", binary, err, out)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	return flags
}

// TestFlagTableCoversEtcdHelp keeps the table in step with etcd: every flag
// of the reference etcd's --help has a row, and no row names another.
func TestFlagTableCoversEtcdHelp(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	etcdFlags := helpFlags(t, filepath.Join(root, "bin", "ref", "etcd"))
	rows := map[string]bool{}
	for _, c := range etcdFlagCases {
		if rows[c.name] {
			t.Errorf("--%s has two rows", c.name)
		}
		rows[c.name] = true
		if !etcdFlags[c.name] {
			t.Errorf("--%s is not a flag of etcd --help", c.name)
		}
	}
	for f := range etcdFlags {
		if !rows[f] {
			t.Errorf("etcd --help lists --%s, which has no row in etcdFlagCases", f)
		}
	}
	if len(etcdFlags) != 136 {
		t.Errorf("etcd --help lists %d flags, want etcd 3.6.16's 136", len(etcdFlags))
	}
}

// TestEveryEtcdFlagIsAccepted starts the target with every etcd flag, two
// processes in all (current names, then the deprecated spellings), and
// checks each starts and serves. Flags of areas other helpers own that the
// binary does not list yet are reported and left out.
func TestEveryEtcdFlagIsAccepted(t *testing.T) {
	_, bin := targetBinary(t)
	listed := helpFlags(t, bin)
	var pending []string
	batches := map[int][]flagCase{}
	for _, c := range etcdFlagCases {
		if !listed[c.name] {
			if c.owner == "cli" {
				t.Errorf("--%s is not accepted (this area implements it)", c.name)
			} else {
				pending = append(pending, fmt.Sprintf("--%s (%s)", c.name, c.owner))
			}
			continue
		}
		batches[c.batch] = append(batches[c.batch], c)
	}
	sort.Strings(pending)
	if len(pending) > 0 {
		t.Logf("owned elsewhere, not accepted yet (%d): %s", len(pending), strings.Join(pending, " "))
	}
	for _, batch := range []int{1, 2} {
		t.Run(fmt.Sprintf("batch%d", batch), func(t *testing.T) {
			ctx := testContext(t, testTimeout)
			dir := t.TempDir()
			ports := freePorts(t, 2+len(batches[batch]))
			args := memberFlags(dir, "m1", ports[0], ports[1])
			next := 2
			for _, c := range batches[batch] {
				v := strings.ReplaceAll(c.value, "{dir}", dir)
				if strings.Contains(v, "{port}") {
					v = strings.ReplaceAll(v, "{port}", fmt.Sprint(ports[next]))
					next++
				}
				args = append(args, "--"+c.name+"="+v)
			}
			m := startRaw(t, dir, args)
			m.waitReady(ctx, fmt.Sprintf("http://127.0.0.1:%d", ports[0]))
			if batch == 2 {
				// etcd's deprecation warning, as etcd words it.
				want := "--experimental-compaction-batch-limit is deprecated in v3.6 and will be decommissioned in v3.7. Use '--compaction-batch-limit' instead."
				if !strings.Contains(strings.Join(m.logLines(), "\n"), want) {
					t.Errorf("log has no deprecation warning %q", want)
				}
			}
		})
	}
}

// TestFlagErrorsAsEtcd checks the refusals an operator sees for a bad
// command line: an unknown flag (exit 2), a stray argument, an unknown
// feature gate, an old and new spelling together, another logger.
func TestFlagErrorsAsEtcd(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		exitCode int
		want     string
	}{
		{[]string{"--no-such-flag=1"}, 2, "flag provided but not defined: -no-such-flag"},
		{[]string{"stray"}, 1, `"stray" is not a valid flag`},
		{[]string{"--feature-gates=NoSuchGate=true"}, 2, "unrecognized feature gate: NoSuchGate"},
		{[]string{"--experimental-compaction-batch-limit=5", "--compaction-batch-limit=6"}, 1,
			"cannot set --experimental-compaction-batch-limit and --compaction-batch-limit at the same time, please use --compaction-batch-limit only"},
		{[]string{"--experimental-initial-corrupt-check=true", "--feature-gates=InitialCorruptCheck=true"}, 1,
			"cannot specify both flags: --experimental-initial-corrupt-check=true and --feature-gates=InitialCorruptCheck=true at the same time, please just use --feature-gates=InitialCorruptCheck=true"},
		{[]string{"--logger=capnslog"}, 1, "--logger=capnslog is removed in v3.5"},
		{[]string{"--log-format=xml"}, 1, "unknown log format: xml, supported values json, console"},
		{[]string{"--listen-client-urls=http://127.0.0.1:0"}, 1, "--advertise-client-urls is required when --listen-client-urls is set explicitly"},
		{[]string{"--initial-cluster=a=http://127.0.0.1:1", "--discovery-endpoints=127.0.0.1:1", "--discovery-token=t"}, 1,
			`multiple discovery or bootstrap flags are set. Choose one of "initial-cluster", "discovery", "discovery-endpoints" or "discovery-srv"`},
		{[]string{"--discovery-token=t"}, 1, "both --discovery-token and --discovery-endpoints must be set"},
		{[]string{"--discovery-fallback=proxy"}, 1, `v2 proxy is deprecated, and --discovery-fallback can't be configured as "proxy"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ctx := testContext(t, 30*time.Second)
			dir := t.TempDir()
			m := startRaw(t, dir, append([]string{"--data-dir=" + filepath.Join(dir, "d")}, tc.args...))
			code, out := m.waitExit(ctx)
			// etcd logs a refused configuration as a JSON line.
			quoted, _ := json.Marshal(tc.want)
			found := strings.Contains(out, tc.want) || strings.Contains(out, strings.Trim(string(quoted), `"`))
			if code != tc.exitCode || !found {
				t.Errorf("exit %d with output:\n%s\nwant exit %d and %q", code, out, tc.exitCode, tc.want)
			}
		})
	}
}

// TestVersionFlag checks --version prints the etcd API version line the
// way etcd's does and exits 0.
func TestVersionFlag(t *testing.T) {
	_, bin := targetBinary(t)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	for _, want := range []string{"etcd Version: 3.6.", "Git SHA: ", "Go Version: go", "Go OS/Arch: "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--version output lacks %q:\n%s", want, out)
		}
	}
}
