package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// etcd's configuration file (--config-file) is YAML read into embed.Config
// through sigs.k8s.io/yaml: keys are the flag names, with a few nested
// sections. When a file is given etcd ignores every other flag and ETCD_*
// variable; so does MetaStore, by setting the flags of a fresh flag set
// from the file, with the same parsing and validation as the command line.

// yamlTopLevelKeys are the keys etcd 3.6's configYAML reads at the top level
// (its json tags); any other key is ignored, as etcd ignores it.
var yamlTopLevelKeys = strings.Fields(`name data-dir wal-dir snapshot-count snapshot-catchup-entries
max-snapshots max-wals heartbeat-interval election-timeout initial-election-tick-advance backend-batch-interval
backend-batch-limit backend-bbolt-freelist-type quota-backend-bytes max-txn-ops max-request-bytes
max-concurrent-streams self-signed-cert-validity cipher-suites tls-min-version tls-max-version
initial-cluster-state discovery-srv discovery-srv-name discovery-proxy discovery initial-cluster
initial-cluster-token strict-reconfig-check auto-compaction-mode auto-compaction-retention
grpc-keepalive-min-time grpc-keepalive-interval grpc-keepalive-timeout pre-vote auth-token bcrypt-cost
auth-token-ttl experimental-initial-corrupt-check experimental-corrupt-check-time corrupt-check-time
experimental-compact-hash-check-enabled experimental-compact-hash-check-time compact-hash-check-time
experimental-enable-lease-checkpoint experimental-enable-lease-checkpoint-persist
experimental-compaction-batch-limit compaction-batch-limit experimental-compaction-sleep-interval
compaction-sleep-interval experimental-watch-progress-notify-interval watch-progress-notify-interval
experimental-warning-apply-duration warning-apply-duration experimental-bootstrap-defrag-threshold-megabytes
bootstrap-defrag-threshold-megabytes warning-unary-request-duration experimental-warning-unary-request-duration
max-learners force-new-cluster enable-pprof metrics listen-metrics-urls experimental-enable-distributed-tracing
enable-distributed-tracing experimental-distributed-tracing-address distributed-tracing-address
experimental-distributed-tracing-service-name distributed-tracing-service-name
experimental-distributed-tracing-instance-id distributed-tracing-instance-id
experimental-distributed-tracing-sampling-rate distributed-tracing-sampling-rate
experimental-peer-skip-client-san-verification logger log-level log-format log-outputs enable-log-rotation
log-rotation-config-json enable-grpc-gateway unsafe-no-fsync experimental-downgrade-check-time
downgrade-check-time memory-mlock experimental-memory-mlock experimental-txn-mode-write-with-shared-buffer
experimental-stop-grpc-service-on-defrag v2-deprecation listen-peer-urls listen-client-urls
listen-client-http-urls initial-advertise-peer-urls advertise-client-urls cors host-whitelist feature-gates`)

// yamlSections map the keys of etcd's nested sections onto flag names.
var yamlSections = map[string]map[string]string{
	"client-transport-security": {
		"cert-file": "cert-file", "key-file": "key-file", "client-cert-file": "client-cert-file",
		"client-key-file": "client-key-file", "client-cert-auth": "client-cert-auth",
		"trusted-ca-file": "trusted-ca-file", "auto-tls": "auto-tls",
		"allowed-hostname": "client-cert-allowed-hostname",
	},
	"peer-transport-security": {
		"cert-file": "peer-cert-file", "key-file": "peer-key-file", "client-cert-file": "peer-client-cert-file",
		"client-key-file": "peer-client-key-file", "client-cert-auth": "peer-client-cert-auth",
		"trusted-ca-file": "peer-trusted-ca-file", "auto-tls": "peer-auto-tls",
		"allowed-cn": "peer-cert-allowed-cn", "allowed-hostname": "peer-cert-allowed-hostname",
		"skip-client-san-verification": "peer-skip-client-san-verification",
	},
	"socket-options":   {"reuse-port": "socket-reuse-port", "reuse-address": "socket-reuse-address"},
	"discovery-config": {"token": "discovery-token"},
}

// configFileNotes are what loading a file did that deserves a log line once
// the logger exists: keys MetaStore does not know.
type configFileNotes struct {
	ignored []string
}

// loadConfigFile sets fs's flags from the YAML file at path.
func loadConfigFile(fs *pflag.FlagSet, path string) (configFileNotes, error) {
	var notes configFileNotes
	b, err := os.ReadFile(path)
	if err != nil {
		return notes, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return notes, fmt.Errorf("%s: %w", path, err)
	}
	known := map[string]bool{}
	for _, k := range yamlTopLevelKeys {
		known[k] = true
	}
	set := func(name string, v any) error {
		if v == nil {
			return nil
		}
		f := fs.Lookup(name)
		if f == nil {
			notes.ignored = append(notes.ignored, name)
			return nil
		}
		s, err := yamlValue(f, v)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, name, err)
		}
		if err := fs.Set(name, s); err != nil {
			return fmt.Errorf("%s: invalid value %q for %s: %w", path, s, name, err)
		}
		return nil
	}
	for k, v := range m {
		switch {
		case k == "experimental-snapshot-catch-up-entries":
			// etcd reads this spelling for the catch-up entries.
			err = set("experimental-snapshot-catchup-entries", v)
		case yamlSections[k] != nil:
			err = setSection(k, v, set)
		case known[k]:
			err = set(k, v)
		default:
			notes.ignored = append(notes.ignored, k)
		}
		if err != nil {
			return notes, err
		}
	}
	return notes, nil
}

// setSection sets the flags of one nested section.
func setSection(section string, v any, set func(string, any) error) error {
	if v == nil {
		return nil
	}
	sm, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("invalid %s", section)
	}
	for k, sv := range sm {
		if section == "discovery-config" && k == "client" {
			if cm, ok := sv.(map[string]any); ok {
				if err := set("discovery-endpoints", cm["endpoints"]); err != nil {
					return err
				}
			}
			continue
		}
		name, ok := yamlSections[section][k]
		if !ok {
			continue
		}
		if err := set(name, sv); err != nil {
			return err
		}
	}
	return nil
}

// yamlValue renders a YAML (JSON-typed) value as the flag's text. Numbers
// for duration flags are nanoseconds, as etcd's time.Duration fields read
// them; "5s" style strings are accepted too.
func yamlValue(f *pflag.Flag, v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		if f.Value.Type() == "duration" {
			return time.Duration(int64(x)).String(), nil
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			s, err := yamlValue(f, e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("unsupported value %v", v)
}
