package main

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/spf13/pflag"
)

// experimentalAliases are the 3.5 spellings etcd 3.6 still accepts for a
// renamed flag (etcd's experimentalFlagMigrationMap, plus the unary request
// warning): old name -> new name.
var experimentalAliases = map[string]string{
	"experimental-compact-hash-check-time":              "compact-hash-check-time",
	"experimental-corrupt-check-time":                   "corrupt-check-time",
	"experimental-compaction-batch-limit":               "compaction-batch-limit",
	"experimental-watch-progress-notify-interval":       "watch-progress-notify-interval",
	"experimental-warning-apply-duration":               "warning-apply-duration",
	"experimental-bootstrap-defrag-threshold-megabytes": "bootstrap-defrag-threshold-megabytes",
	"experimental-memory-mlock":                         "memory-mlock",
	"experimental-snapshot-catchup-entries":             "snapshot-catchup-entries",
	"experimental-compaction-sleep-interval":            "compaction-sleep-interval",
	"experimental-downgrade-check-time":                 "downgrade-check-time",
	"experimental-peer-skip-client-san-verification":    "peer-skip-client-san-verification",
	"experimental-enable-distributed-tracing":           "enable-distributed-tracing",
	"experimental-distributed-tracing-address":          "distributed-tracing-address",
	"experimental-distributed-tracing-service-name":     "distributed-tracing-service-name",
	"experimental-distributed-tracing-instance-id":      "distributed-tracing-instance-id",
	"experimental-distributed-tracing-sampling-rate":    "distributed-tracing-sampling-rate",
	"experimental-warning-unary-request-duration":       "warning-unary-request-duration",
}

// deprecationWarnings are etcd 3.6's warnings (etcdmain's deprecatedFlags),
// logged once for each of these flags set explicitly.
var deprecationWarnings = map[string]string{
	"max-snapshots":  "--max-snapshots is deprecated in 3.6 and will be decommissioned in 3.8.",
	"v2-deprecation": "--v2-deprecation is deprecated and scheduled for removal in v3.8. The default value is enforced, ignoring user input.",
	"experimental-compact-hash-check-enabled":           "--experimental-compact-hash-check-enabled is deprecated in 3.6 and will be decommissioned in 3.7. Use '--feature-gates=CompactHashCheck=true' instead.",
	"experimental-compact-hash-check-time":              "--experimental-compact-hash-check-time is deprecated in 3.6 and will be decommissioned in 3.7. Use '--compact-hash-check-time' instead.",
	"experimental-txn-mode-write-with-shared-buffer":    "--experimental-txn-mode-write-with-shared-buffer is deprecated in v3.6 and will be decommissioned in v3.7. Use '--feature-gates=TxnModeWriteWithSharedBuffer=true' instead.",
	"experimental-corrupt-check-time":                   "--experimental-corrupt-check-time is deprecated in v3.6 and will be decommissioned in v3.7. Use '--corrupt-check-time' instead.",
	"experimental-compaction-batch-limit":               "--experimental-compaction-batch-limit is deprecated in v3.6 and will be decommissioned in v3.7. Use '--compaction-batch-limit' instead.",
	"experimental-watch-progress-notify-interval":       "--experimental-watch-progress-notify-interval is deprecated in v3.6 and will be decommissioned in v3.7. Use '--watch-progress-notify-interval' instead.",
	"experimental-warning-apply-duration":               "--experimental-warning-apply-duration is deprecated in v3.6 and will be decommissioned in v3.7. Use '--warning-apply-duration' instead.",
	"experimental-bootstrap-defrag-threshold-megabytes": "--experimental-bootstrap-defrag-threshold-megabytes is deprecated in v3.6 and will be decommissioned in v3.7. Use '--bootstrap-defrag-threshold-megabytes' instead.",
	"experimental-memory-mlock":                         "--experimental-memory-mlock is deprecated in v3.6 and will be decommissioned in v3.7. Use '--memory-mlock' instead.",
	"experimental-snapshot-catchup-entries":             "--experimental-snapshot-catchup-entries is deprecated in v3.6 and will be decommissioned in v3.7. Use '--snapshot-catchup-entries' instead.",
	"experimental-compaction-sleep-interval":            "--experimental-compaction-sleep-interval is deprecated in v3.6 and will be decommissioned in v3.7. Use 'compaction-sleep-interval' instead.",
	"experimental-downgrade-check-time":                 "--experimental-downgrade-check-time is deprecated in v3.6 and will be decommissioned in v3.7. Use '--downgrade-check-time' instead.",
	"experimental-enable-distributed-tracing":           "--experimental-enable-distributed-tracing is deprecated in 3.6 and will be decommissioned in 3.7. Use --enable-distributed-tracing instead.",
	"experimental-distributed-tracing-address":          "--experimental-distributed-tracing-address is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-address instead.",
	"experimental-distributed-tracing-service-name":     "--experimental-distributed-tracing-service-name is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-service-name instead.",
	"experimental-distributed-tracing-instance-id":      "--experimental-distributed-tracing-instance-id is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-instance-id instead.",
	"experimental-distributed-tracing-sampling-rate":    "--experimental-distributed-tracing-sampling-rate is deprecated in 3.6 and will be decommissioned in 3.7. Use --distributed-tracing-sampling-rate instead.",
	"experimental-warning-unary-request-duration":       "--experimental-warning-unary-request-duration is deprecated, and will be decommissioned in v3.7. Use --warning-unary-request-duration instead.",
}

// registerDeprecated registers every old spelling whose new flag is
// registered, sharing the new flag's value: setting either sets both. An
// old spelling whose new flag no area registers is left out, so it is
// refused as unknown rather than silently ignored.
func registerDeprecated(fs *pflag.FlagSet) {
	olds := make([]string, 0, len(experimentalAliases))
	for old := range experimentalAliases {
		olds = append(olds, old)
	}
	sort.Strings(olds)
	for _, old := range olds {
		nf := fs.Lookup(experimentalAliases[old])
		if nf == nil || fs.Lookup(old) != nil {
			continue
		}
		f := fs.VarPF(nf.Value, old, "", fmt.Sprintf("%s Deprecated in v3.6 and will be decommissioned in v3.7. Use '--%s' instead.", nf.Usage, nf.Name))
		f.DefValue = nf.DefValue
		f.NoOptDefVal = nf.NoOptDefVal
	}
}

// checkDeprecated refuses an old and a new spelling set together, with
// etcd's messages.
func checkDeprecated(fs *pflag.FlagSet) error {
	changed := func(name string) bool { f := fs.Lookup(name); return f != nil && f.Changed }
	if changed("experimental-warning-unary-request-duration") && changed("warning-unary-request-duration") {
		return errors.New("both --experimental-warning-unary-request-duration and --warning-unary-request-duration flags are set. " +
			"Use only --warning-unary-request-duration")
	}
	olds := make([]string, 0, len(experimentalAliases))
	for old := range experimentalAliases {
		olds = append(olds, old)
	}
	sort.Strings(olds)
	for _, old := range olds {
		if nw := experimentalAliases[old]; changed(old) && changed(nw) {
			return fmt.Errorf("cannot set --%s and --%s at the same time, please use --%s only", old, nw, nw)
		}
	}
	return nil
}

// warnDeprecated logs etcd's warning once for each deprecated flag set.
func warnDeprecated(fs *pflag.FlagSet, logger *slog.Logger) {
	fs.Visit(func(f *pflag.Flag) {
		if msg, ok := deprecationWarnings[f.Name]; ok {
			logger.Warn(msg)
		}
	})
}
