package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// noEffectFlags are etcd flags that tune parts MetaStore does not have
// (bbolt, v2 store, OpenTelemetry export, downgrades). They are accepted
// with etcd's type, default and validation, so an etcd command line
// starts; setting one logs once that it has no effect, and why. The README
// lists them with the same reasons.
type noEffectFlags struct {
	freelistType        string
	batchInterval       time.Duration
	batchLimit          int
	memoryMlock         bool
	compactionSleep     time.Duration
	warningApply        time.Duration
	warningUnary        time.Duration
	bootstrapDefragMB   uint
	downgradeCheck      time.Duration
	tracingEnabled      bool
	tracingAddress      string
	tracingService      string
	tracingInstance     string
	tracingSamplingRate int
	v2Deprecation       string
}

// noEffectReasons says, for each flag accepted without effect, why.
var noEffectReasons = map[string]string{
	"backend-bbolt-freelist-type":          "MetaStore's storage engines (memory, RocksDB) are not bbolt and have no freelist",
	"backend-batch-interval":               "MetaStore commits each Raft apply batch to its engine at once; there is no bbolt batch transaction to hold open",
	"backend-batch-limit":                  "MetaStore commits each Raft apply batch to its engine at once; there is no bbolt batch transaction to hold open",
	"memory-mlock":                         "it pins bbolt's memory-mapped pages; MetaStore maps no database file",
	"compaction-sleep-interval":            "MetaStore deletes a compaction's old revisions one batch per apply commit and whenever the apply loop is idle, without a fixed pause between batches",
	"warning-apply-duration":               "MetaStore exports apply latency as a metric instead of logging slow applies",
	"warning-unary-request-duration":       "MetaStore exports request latency as a metric instead of logging slow requests",
	"bootstrap-defrag-threshold-megabytes": "there is no bbolt file to defragment at start; the RocksDB engine compacts in the background",
	"downgrade-check-time":                 "etcd checks this often whether every member runs a downgrade's target version, to end the job; a MetaStore member always runs as etcd 3.6, so a job ends only by `downgrade cancel`",
	"enable-distributed-tracing":           "MetaStore does not export OpenTelemetry traces",
	"distributed-tracing-address":          "MetaStore does not export OpenTelemetry traces",
	"distributed-tracing-service-name":     "MetaStore does not export OpenTelemetry traces",
	"distributed-tracing-instance-id":      "MetaStore does not export OpenTelemetry traces",
	"distributed-tracing-sampling-rate":    "MetaStore does not export OpenTelemetry traces",
	"v2-deprecation":                       "MetaStore has no v2 store; etcd 3.6 also enforces its default whatever is given",
	"raft-read-timeout":                    "MetaStore's peer transport bounds dials, handshakes and stalled streams with its own 5 s timeouts and finds dead peers by heartbeats",
	"raft-write-timeout":                   "MetaStore's peer transport bounds dials, handshakes and stalled streams with its own 5 s timeouts and finds dead peers by heartbeats",
}

// v2DeprecationLevels are etcd's --v2-deprecation values.
var v2DeprecationLevels = []string{"not-yet", "write-only", "write-only-skip-check", "write-only-drop-data", "gone"}

func (o *options) registerNoEffect(fs *pflag.FlagSet) {
	n := &o.noEffect
	fs.StringVar(&n.freelistType, "backend-bbolt-freelist-type", "map", "BackendFreelistType specifies the type of freelist that boltdb backend uses(array and map are supported types). No effect in MetaStore.")
	fs.DurationVar(&n.batchInterval, "backend-batch-interval", 0, "BackendBatchInterval is the maximum time before commit the backend transaction. No effect in MetaStore.")
	fs.IntVar(&n.batchLimit, "backend-batch-limit", 0, "BackendBatchLimit is the maximum operations before commit the backend transaction. No effect in MetaStore.")
	fs.BoolVar(&n.memoryMlock, "memory-mlock", false, "Enable to enforce etcd pages (in particular bbolt) to stay in RAM. No effect in MetaStore.")
	fs.DurationVar(&n.compactionSleep, "compaction-sleep-interval", 10*time.Millisecond, "Sets the sleep interval between each compaction batch. No effect in MetaStore.")
	fs.DurationVar(&n.warningApply, "warning-apply-duration", 100*time.Millisecond, "Warning is generated if requests take more than this duration. No effect in MetaStore.")
	fs.DurationVar(&n.warningUnary, "warning-unary-request-duration", 300*time.Millisecond, "Set time duration after which a warning is logged if a unary request takes more than this duration. No effect in MetaStore.")
	fs.UintVar(&n.bootstrapDefragMB, "bootstrap-defrag-threshold-megabytes", 0, "Enable the defrag during etcd server bootstrap on condition that it will free at least the provided threshold of disk space. No effect in MetaStore.")
	fs.DurationVar(&n.downgradeCheck, "downgrade-check-time", 5*time.Second, "Duration of time between two downgrade status checks. No effect in MetaStore.")
	fs.BoolVar(&n.tracingEnabled, "enable-distributed-tracing", false, "Enable distributed tracing. No effect in MetaStore.")
	fs.StringVar(&n.tracingAddress, "distributed-tracing-address", "localhost:4317", "Distributed tracing collector address. No effect in MetaStore.")
	fs.StringVar(&n.tracingService, "distributed-tracing-service-name", "etcd", "Distributed tracing service name, must be same across all etcd instances. No effect in MetaStore.")
	fs.StringVar(&n.tracingInstance, "distributed-tracing-instance-id", "", "Distributed tracing instance ID, must be unique per each etcd instance. No effect in MetaStore.")
	fs.IntVar(&n.tracingSamplingRate, "distributed-tracing-sampling-rate", 0, "Number of samples to collect per million spans for distributed tracing. No effect in MetaStore.")
	fs.Var(newChoiceValue(&n.v2Deprecation, "write-only", v2DeprecationLevels), "v2-deprecation", "v2store deprecation stage. Deprecated and scheduled for removal in v3.8. No effect in MetaStore.")
}

// validate checks the values etcd checks even though they change nothing.
func (n *noEffectFlags) validate() error {
	if n.tracingEnabled && (n.tracingSamplingRate < 0 || n.tracingSamplingRate > 1000000) {
		return fmt.Errorf("distributed tracing configurition is not valid: (tracing sampling rate must be positive and less than one million samples per second)")
	}
	return nil
}

// logNoEffect says once, for each flag set that changes nothing here, why.
func logNoEffect(fs *pflag.FlagSet, logger *slog.Logger) {
	fs.Visit(func(f *pflag.Flag) {
		name := f.Name
		if nw, ok := experimentalAliases[name]; ok {
			name = nw
		}
		if reason, ok := noEffectReasons[name]; ok {
			logger.Warn("flag has no effect in MetaStore", "flag", "--"+f.Name, "value", f.Value.String(), "reason", reason)
		}
	})
}

// choiceValue is a string flag restricted to a set of values, with etcd's
// SelectiveStringValue message.
type choiceValue struct {
	v      *string
	valids []string
}

func newChoiceValue(p *string, def string, valids []string) *choiceValue {
	*p = def
	return &choiceValue{v: p, valids: valids}
}

func (c *choiceValue) String() string { return *c.v }
func (c *choiceValue) Type() string   { return "string" }

func (c *choiceValue) Set(s string) error {
	for _, v := range c.valids {
		if s == v {
			*c.v = s
			return nil
		}
	}
	return fmt.Errorf("invalid value %q, valid values are: %s", s, strings.Join(quoteAll(c.valids), ", "))
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
