package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) (*options, *pflag.FlagSet, error) {
	t.Helper()
	o := &options{}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		return o, fs, err
	}
	_, _, err := resolveFlags(fs, o)
	return o, fs, err
}

func TestDeprecatedSpellingSetsTheNewFlag(t *testing.T) {
	o, fs, err := parse(t, "--experimental-watch-progress-notify-interval=5s", "--experimental-snapshot-catchup-entries=77")
	if err != nil {
		t.Fatal(err)
	}
	if o.watchProgressInterval != 5*time.Second || o.raft.snapshotCatchUpEntries != 77 {
		t.Fatalf("watch progress %v, catch-up %d", o.watchProgressInterval, o.raft.snapshotCatchUpEntries)
	}
	if fs.Lookup("watch-progress-notify-interval").Changed {
		t.Fatal("the new spelling counts as set")
	}
	if _, _, err := parse(t, "--experimental-watch-progress-notify-interval=5s", "--watch-progress-notify-interval=6s"); err == nil ||
		!strings.Contains(err.Error(), "cannot set --experimental-watch-progress-notify-interval and --watch-progress-notify-interval at the same time") {
		t.Fatalf("both spellings: %v", err)
	}
}

func TestFeatureGates(t *testing.T) {
	o, _, err := parse(t, "--feature-gates=AllAlpha=true,TxnModeWriteWithSharedBuffer=false")
	if err != nil {
		t.Fatal(err)
	}
	if !o.features.Enabled("InitialCorruptCheck") || o.features.Enabled("TxnModeWriteWithSharedBuffer") || o.features.Enabled("NoSuch") {
		t.Fatalf("gates %s", o.features.String())
	}
	o, _, err = parse(t, "--experimental-compact-hash-check-enabled=true")
	if err != nil || !o.features.Enabled("CompactHashCheck") || o.features.Enabled("InitialCorruptCheck") {
		t.Fatalf("experimental flag: %v %s", err, o.features.String())
	}
	for args, want := range map[string]string{
		"--feature-gates=Nope=true":            "unrecognized feature gate: Nope",
		"--feature-gates=InitialCorruptCheck":  "missing bool value for InitialCorruptCheck",
		"--feature-gates=LeaseCheckpoint=nope": "invalid value of LeaseCheckpoint=nope",
	} {
		if _, _, err := parse(t, args); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	if _, _, err := parse(t, "--feature-gates=LeaseCheckpointPersist=true"); err == nil ||
		err.Error() != "enabling feature gate LeaseCheckpointPersist requires enabling feature gate LeaseCheckpoint" {
		t.Errorf("persist without checkpoint: %v", err)
	}
}

func TestConfigFileSetsFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etcd.conf.yml")
	yml := `name: infra1
data-dir: /var/lib/x
heartbeat-interval: 200
election-timeout: 2000
listen-client-urls: http://127.0.0.1:2379,unix://localhost:2399
advertise-client-urls: http://127.0.0.1:2379
grpc-keepalive-interval: 7200000000000
watch-progress-notify-interval: 5s
log-outputs: [stdout, /tmp/x.log]
cors: http://a.example:1
experimental-initial-corrupt-check: true
experimental-snapshot-catch-up-entries: 99
socket-options:
  reuse-port: true
peer-transport-security:
  client-cert-auth: false
unknown-key: 1
`
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _, err := parse(t, "--config-file="+path, "--name=ignored")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case o.name != "infra1", o.dataDir != "/var/lib/x", o.heartbeatMs != 200, o.electionMs != 2000:
		t.Errorf("member flags: %+v", o)
	case o.listenClientURLs != "http://127.0.0.1:2379,unix://localhost:2399":
		t.Errorf("listen-client-urls %q", o.listenClientURLs)
	case o.listen.keepAliveInterval != 2*time.Hour, o.watchProgressInterval != 5*time.Second:
		t.Errorf("durations %v %v", o.listen.keepAliveInterval, o.watchProgressInterval)
	case !slices.Equal(o.log.outputs, []string{"stdout", "/tmp/x.log"}), !slices.Equal(o.listen.cors, []string{"http://a.example:1"}):
		t.Errorf("lists %v %v", o.log.outputs, o.listen.cors)
	case !o.features.Enabled("InitialCorruptCheck"), o.raft.snapshotCatchUpEntries != 99, !o.listen.reusePort:
		t.Errorf("gate %v catch-up %d reuse-port %v", o.features.Enabled("InitialCorruptCheck"), o.raft.snapshotCatchUpEntries, o.listen.reusePort)
	}
}

func TestNormalizeArgs(t *testing.T) {
	root := newRootCommand()
	got := normalizeArgs(root, []string{"-name", "x", "-data-dir=/d", "-h", "--", "-name"})
	want := []string{"--name", "x", "--data-dir=/d", "-h", "--", "-name"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestDiscoveryRefusedOnlyForANewMember(t *testing.T) {
	d := discoveryFlags{srv: "example.com"}
	o := &options{dataDir: t.TempDir()}
	logger := slog.New(slog.DiscardHandler)
	if err := d.bootstrap(t.Context(), o, logger); err == nil || !strings.Contains(err.Error(), "--discovery-srv") {
		t.Fatalf("new member: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(o.dataDir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := d.bootstrap(t.Context(), o, logger); err != nil {
		t.Fatalf("restart: %v", err)
	}
}

// FuzzLoadConfigFile feeds arbitrary files to the configuration loader:
// it must return an error or set flags, never panic.
func FuzzLoadConfigFile(f *testing.F) {
	f.Add([]byte("name: a\nheartbeat-interval: 100\nlog-outputs: [stderr]\n"))
	f.Add([]byte("client-transport-security:\n  cert-file: x\nsocket-options: 3\n"))
	f.Add([]byte("discovery-config:\n  client:\n    endpoints: [a, b]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "c.yml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		o := &options{}
		fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
		o.register(fs)
		_, _ = loadConfigFile(fs, path)
	})
}

// TestLockServiceLockDelay: the lock delay is validated against the lock
// lease: above 0 and below its TTL·(1−2ρ) less a renewal period (4.4 s).
func TestLockServiceLockDelay(t *testing.T) {
	for _, c := range []struct {
		arg string
		ok  bool
	}{{"", true}, {"--lock-service-lock-delay=2s", true}, {"--lock-service-lock-delay=0", false}, {"--lock-service-lock-delay=4.4s", false}} {
		args := []string{"--name=m"}
		if c.arg != "" {
			args = append(args, c.arg)
		}
		o, _, err := parse(t, args...)
		if err == nil {
			err = o.validateLimits()
		}
		if (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok=%v", c.arg, err, c.ok)
		}
	}
}

func TestRocksDBStatsInterval(t *testing.T) {
	o, _, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := o.rocksdbOptions(slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if opts.StatsInterval != 0 {
		t.Errorf("default stats interval %v, want 0 (off)", opts.StatsInterval)
	}
	o, _, err = parse(t, "--rocksdb-stats-interval=10s")
	if err != nil {
		t.Fatal(err)
	}
	if opts, err = o.rocksdbOptions(slog.Default()); err != nil || opts.StatsInterval != 10*time.Second {
		t.Errorf("--rocksdb-stats-interval=10s: %v, %v; want 10s", opts.StatsInterval, err)
	}
}

// TestInferLocalAddr is etcd's choice of a member's local address under
// SetMemberLocalAddr: the first advertised peer URL with an IP host that
// is neither loopback nor unspecified.
func TestInferLocalAddr(t *testing.T) {
	for _, c := range []struct {
		urls []string
		want string
	}{
		{[]string{"https://10.0.0.5:2380"}, "10.0.0.5"},
		{[]string{"http://127.0.0.1:2380", "http://0.0.0.0:2380", "http://peer.example:2380", "http://[fd00::7]:2380"}, "fd00::7"},
		{[]string{"http://127.0.0.1:2380", "http://peer.example:2380"}, ""},
	} {
		if got := inferLocalAddr(c.urls, slog.New(slog.DiscardHandler)); got != c.want {
			t.Errorf("inferLocalAddr(%v) = %q, want %q", c.urls, got, c.want)
		}
	}
}
